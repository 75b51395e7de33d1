// Command fleetsim runs a fleet of workers against one shared bucket on the
// local stack and reports the aggregate grant rate against the limit: the
// smallest demonstration that N processes together stay under one quota.
//
//	eval "$(scripts/localstack.sh start)"
//	go run ./test/fleetsim -workers 16 -rate 20 -burst 40 -duration 10s
//
// scripts/demo.sh does both.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

type options struct {
	workers  int
	rate     float64
	burst    int
	duration time.Duration
	key      string
	table    string
	maxWait  time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("fleetsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.workers, "workers", 16, "number of workers, each with its own client and Limiter (≥ 1)")
	fs.Float64Var(&o.rate, "rate", 20, "the shared limit's rate, tokens per second (> 0)")
	fs.IntVar(&o.burst, "burst", 40, "the shared limit's burst (≥ 1)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long the fleet runs (≥ 1s)")
	fs.StringVar(&o.key, "key", "booking_com#demo-credential#availability", "the bucket key")
	fs.StringVar(&o.table, "table", envOr("FLEETBUCKET_TABLE", limiter.DefaultTable), "the limiter table")
	fs.DurationVar(&o.maxWait, "max-wait", 5*time.Second, "how far ahead a worker may reserve its slot (> 0)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var problems []error
	if o.workers < 1 {
		problems = append(problems, fmt.Errorf("-workers is %d, want ≥ 1", o.workers))
	}
	if o.duration < time.Second {
		problems = append(problems, fmt.Errorf("-duration is %v, want ≥ 1s", o.duration))
	}
	if o.maxWait <= 0 {
		problems = append(problems, fmt.Errorf("-max-wait is %v, want > 0", o.maxWait))
	}
	if err := (limiter.Bucket{Key: o.key, Limit: limiter.PerSecond(o.rate, o.burst)}).Validate(); err != nil {
		problems = append(problems, fmt.Errorf("-key/-rate/-burst: %w", err))
	}
	if err := errors.Join(problems...); err != nil {
		fmt.Fprintf(stderr, "fleetsim: %v\n", err)
		fs.Usage()
		return o, err
	}
	return o, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "fleetsim: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	// The local stack or a brought endpoint; its logger is
	// emulator.QuietCancelled, as calls cut short at the end warn for nothing.
	cfg, err := emulator.Load(ctx)
	if err != nil {
		return fmt.Errorf("%w (or run scripts/demo.sh fleet)", err)
	}
	admin := dynamodb.NewFromConfig(cfg, emulator.ForEmulator)
	if emulator.Brought() {
		// A table of the run's own, deleted at the end: an endpoint the
		// user brings keeps nothing of a run.
		o.table = emulator.Name(o.table, 255)
		defer func() {
			_, _ = admin.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &o.table})
		}()
	}
	if err := limiter.CreateTable(ctx, admin, o.table); err != nil {
		return err
	}
	lim := limiter.PerSecond(o.rate, o.burst)
	bucket := limiter.Bucket{Key: fmt.Sprintf("%s#%d", o.key, time.Now().UnixNano()), Limit: lim}
	fmt.Fprintf(out, "fleetsim: %d workers share one bucket (rate %g/s, burst %d) for %v; each would happily send as fast as it can\n",
		o.workers, o.rate, o.burst, o.duration)

	var (
		mu     sync.Mutex
		grants []time.Time
		calls  atomic.Int64
		errs   atomic.Int64
	)
	runCtx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range o.workers {
		counter := &dynamotest.Counter{DB: dynamodb.NewFromConfig(cfg, emulator.ForEmulator)}
		l, err := limiter.New(counter, limiter.WithTable(o.table))
		if err != nil {
			return err
		}
		wg.Go(func() {
			defer func() { calls.Add(counter.Calls()) }()
			for runCtx.Err() == nil {
				r, err := l.Wait(runCtx, bucket, 1, o.maxWait)
				if wait, denied := limiter.RetryAfter(err); denied {
					sleep(runCtx, wait)
					continue
				}
				if errors.Is(err, context.DeadlineExceeded) {
					return // the run is over (Wait may say so before runCtx does)
				}
				if err != nil {
					if runCtx.Err() == nil {
						errs.Add(1)
						fmt.Fprintf(os.Stderr, "worker: %v\n", err)
						sleep(runCtx, time.Second)
					}
					continue
				}
				mu.Lock()
				grants = append(grants, r.Slot)
				mu.Unlock()
			}
		})
	}
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(runCtx, out, start, lim, func() int { mu.Lock(); defer mu.Unlock(); return len(grants) })
	}()
	wg.Wait()
	cancel()
	<-progressDone
	elapsed := time.Since(start)
	return report(out, grants, lim, elapsed, calls.Load(), errs.Load(), o.workers)
}

func progress(ctx context.Context, out io.Writer, start time.Time, lim limiter.Limit, count func() int) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			n := count()
			fmt.Fprintf(out, "  t=%4.1fs  grants %5d  last second %3d/s  (limit %g/s after a burst of %d)\n",
				now.Sub(start).Seconds(), n, n-last, lim.Rate, lim.Burst)
			last = n
		}
	}
}

func report(out io.Writer, grants []time.Time, lim limiter.Limit, elapsed time.Duration, calls, errs int64, workers int) error {
	wl := window.Limit{Rate: lim.Rate, Burst: lim.Burst}
	allowed := wl.Bound(elapsed)
	fullest, broken := window.Fullest(grants, wl)
	worst, worstWindow := fullest.Ratio(), fullest.Width()
	steady := 0.0
	if elapsed > time.Second && len(grants) > lim.Burst {
		steady = float64(len(grants)-lim.Burst) / elapsed.Seconds()
	}
	fmt.Fprintf(out, "\nfleetsim report (%d workers, %v)\n", workers, elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "  grants                    %d of the %.0f that burst + rate·T allows (utilization %.1f%%)\n", len(grants), allowed, 100*float64(len(grants))/allowed)
	fmt.Fprintf(out, "  aggregate rate after burst %.2f/s against a limit of %g/s\n", steady, lim.Rate)
	fmt.Fprintf(out, "  fullest window            %.1f%% of its bound (window %v)\n", 100*worst, worstWindow.Round(time.Millisecond))
	fmt.Fprintf(out, "  DynamoDB calls per grant  %.3f\n", float64(calls)/float64(max(len(grants), 1)))
	fmt.Fprintf(out, "  store errors              %d\n", errs)
	if broken {
		return fmt.Errorf("the fleet exceeded its limit: a window used %.1f%% of burst + rate·W", 100*worst)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) { _ = ctxsleep.Sleep(ctx, d) }
