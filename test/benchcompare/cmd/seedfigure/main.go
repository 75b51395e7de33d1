// Command seedfigure measures the figure the seed articles draw: the same
// workload sent two ways to a vendor that meters one quota per credential.
//
//   - local: every worker paces itself with its own golang.org/x/time/rate
//     limiter, set to the quota ÷ the initial worker count (-initial), as a
//     team does when it sizes a fleet once. When the fleet grows, the
//     vendor sees the sum.
//   - shared: every worker waits for a token of one fleetbucket bucket
//     (limiter.Wait on DynamoDB, each worker its own client and limiter).
//
// Each run sends as fast as its limiter lets it to the mock OTA
// (test/mockota) for -duration, and the vendor's record gives the requests
// sent per second and the 429s. It prints a Markdown table, writes the chart
// as SVG (-out) and the numbers as JSON (-json). With the local stack up:
//
//	cd test/benchcompare && go run ./cmd/seedfigure -out ../../docs/bench/fleet-vs-local.svg
//
// scripts/bench.sh runs it with the rest of the benchmarks.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"golang.org/x/time/rate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	workers  []int
	initial  int
	rate     float64
	burst    int
	duration time.Duration
	out      string
	jsonOut  string
	from     string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var workers string
	fs := flag.NewFlagSet("seedfigure", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: seedfigure [flags]\n\n"+
			"Sends the same workload to a mock OTA two ways, per-worker local limiters and one shared\n"+
			"fleetbucket bucket, at each worker count; prints a Markdown table and draws the chart.\n"+
			"Needs the local stack (eval \"$(scripts/localstack.sh start)\").\n\nflags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&workers, "workers", "4,40", "comma-separated worker counts, each ≥ 1")
	fs.IntVar(&o.initial, "initial", 0, "the worker count each local limiter was sized for: it gets quota ÷ initial (default: the first of -workers)")
	fs.Float64Var(&o.rate, "rate", 20, "the vendor's quota, requests per second per credential (> 0)")
	fs.IntVar(&o.burst, "burst", 20, "the vendor's burst (≥ 1)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long each run sends (≥ 2s: the first second is the burst)")
	fs.StringVar(&o.out, "out", "", "write the chart here as SVG (e.g. docs/bench/fleet-vs-local.svg)")
	fs.StringVar(&o.jsonOut, "json", "", "write the numbers here as JSON")
	fs.StringVar(&o.from, "from", "", "measure nothing: read the numbers from this -json file and print and draw them")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	for _, f := range strings.Split(workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 500 {
			problems = append(problems, fmt.Sprintf("-workers: %q is not a worker count in 1..500", f))
			continue
		}
		o.workers = append(o.workers, n)
	}
	if o.initial == 0 && len(o.workers) > 0 {
		o.initial = o.workers[0]
	}
	if o.initial < 1 {
		problems = append(problems, fmt.Sprintf("-initial is %d, want ≥ 1", o.initial))
	}
	if err := gcra.PerSecond(o.rate, o.burst).Validate(); err != nil {
		problems = append(problems, "-rate/-burst: "+err.Error())
	}
	if o.duration < 2*time.Second || o.duration > 5*time.Minute {
		problems = append(problems, fmt.Sprintf("-duration is %v, want 2s..5m", o.duration))
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "seedfigure: "+strings.Join(problems, "\nseedfigure: "))
		fs.Usage()
		return o, errUsage
	}
	return o, nil
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	var res *Results
	if o.from != "" {
		res, err = load(o.from)
	} else {
		res, err = measure(ctx, o, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "seedfigure: %v\n", err)
		return 1
	}
	fmt.Fprint(stdout, res.Markdown())
	if o.out != "" {
		if err := writeFile(o.out, func(w io.Writer) error { return res.SVG(w) }); err != nil {
			fmt.Fprintf(stderr, "seedfigure: %v\n", err)
			return 1
		}
	}
	if o.jsonOut != "" {
		err := writeFile(o.jsonOut, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		})
		if err != nil {
			fmt.Fprintf(stderr, "seedfigure: %v\n", err)
			return 1
		}
	}
	return 0
}

func load(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(r.Runs) == 0 || r.Quota <= 0 || r.Initial < 1 {
		return nil, fmt.Errorf("%s: no runs, or no quota or initial worker count", path)
	}
	return &r, nil
}

// writeFile writes through a temporary file, so a failed run never leaves
// half a chart behind.
func writeFile(path string, write func(io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// Results is what seedfigure measured.
type Results struct {
	Quota    float64 `json:"quota_per_second"`
	Burst    int     `json:"burst"`
	Initial  int     `json:"initial_workers"`
	Duration float64 `json:"run_seconds"`
	Runs     []Run   `json:"runs"`
}

// Run is one (mode, workers) run.
type Run struct {
	Mode    string `json:"mode"` // "local" or "shared"
	Workers int    `json:"workers"`
	// Sent is every request the vendor received; Accepted and Throttled
	// (429) split it.
	Sent      int `json:"sent"`
	Accepted  int `json:"accepted"`
	Throttled int `json:"throttled_429"`
	// SteadyThrottled is the part of Throttled after the first second.
	SteadyThrottled int `json:"steady_throttled_429"`
	// SteadyRate is requests sent per second after the first second (when
	// every limiter's initial burst is spent); SteadyAccepted likewise.
	SteadyRate     float64 `json:"steady_rate"`
	SteadyAccepted float64 `json:"steady_accepted_rate"`
	// DynamoDBPerGrant is the shared bucket's DynamoDB requests per token.
	DynamoDBPerGrant float64 `json:"dynamodb_requests_per_grant,omitempty"`
}

const (
	modeLocal  = "local"
	modeShared = "shared"
)

func measure(ctx context.Context, o options, log io.Writer) (*Results, error) {
	cfg, err := benchkit.Config(ctx)
	if err != nil {
		return nil, err
	}
	admin := dynamodb.NewFromConfig(cfg)
	table, drop, err := benchkit.NewTable(ctx, admin, "seedfigure")
	if err != nil {
		return nil, err
	}
	defer drop()
	quota := gcra.PerSecond(o.rate, o.burst)
	ota, err := mockota.Start(mockota.Config{Limit: quota})
	if err != nil {
		return nil, err
	}
	defer ota.Close()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000}}

	res := &Results{Quota: o.rate, Burst: o.burst, Initial: o.initial, Duration: o.duration.Seconds()}
	for _, n := range o.workers {
		for _, mode := range []string{modeLocal, modeShared} {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			fmt.Fprintf(log, "seedfigure: %d workers, %s limiters, %v\n", n, mode, o.duration)
			cred := fmt.Sprintf("%s-%d", mode, n)
			r := fleet{o: o, mode: mode, workers: n, cred: cred, url: ota.URL() + "/v1/availability", hc: hc, table: table}
			start, perGrant, err := r.run(ctx, cfg)
			if err != nil {
				return nil, err
			}
			res.Runs = append(res.Runs, tally(ota, mode, n, cred, start, o.duration, perGrant))
		}
	}
	return res, nil
}

// tally reads what the vendor saw from one credential.
func tally(ota *mockota.Server, mode string, n int, cred string, start time.Time, d time.Duration, perGrant float64) Run {
	r := Run{Mode: mode, Workers: n, DynamoDBPerGrant: perGrant}
	steadyFrom := start.Add(time.Second)
	var steady, steadyOK int
	for _, q := range ota.Requests() {
		if q.Credential != cred {
			continue
		}
		r.Sent++
		ok := q.Status >= 200 && q.Status < 300
		if ok {
			r.Accepted++
		}
		if q.Status == http.StatusTooManyRequests {
			r.Throttled++
		}
		if !q.At.Before(steadyFrom) {
			steady++
			if ok {
				steadyOK++
			}
			if q.Status == http.StatusTooManyRequests {
				r.SteadyThrottled++
			}
		}
	}
	secs := (d - time.Second).Seconds()
	r.SteadyRate, r.SteadyAccepted = float64(steady)/secs, float64(steadyOK)/secs
	return r
}

type fleet struct {
	o       options
	mode    string
	workers int
	cred    string
	url     string
	hc      *http.Client
	table   string
}

// run sends from every worker until the duration has passed and returns
// when it started, and for the shared bucket its DynamoDB requests per
// grant.
func (f fleet) run(ctx context.Context, cfg aws.Config) (time.Time, float64, error) {
	meter := &benchkit.Meter{}
	var failures atomic.Int64
	var firstFailure atomic.Value
	bucket := limiter.Bucket{Key: "seedfigure#" + f.cred, Limit: gcra.PerSecond(f.o.rate, f.o.burst)}
	acquire := make([]func(context.Context) bool, f.workers)
	for i := range acquire {
		if f.mode == modeLocal {
			// Sized once, for the initial fleet: quota ÷ initial each.
			lim := rate.NewLimiter(rate.Limit(f.o.rate/float64(f.o.initial)), max(1, f.o.burst/f.o.initial))
			acquire[i] = func(ctx context.Context) bool { return lim.Wait(ctx) == nil }
			continue
		}
		l, err := limiter.New(dynamodb.NewFromConfig(cfg, meter.Option(), benchkit.ForEmulator), limiter.WithTable(f.table))
		if err != nil {
			return time.Time{}, 0, err
		}
		take := benchkit.SDKWait(l, bucket, 5*time.Second)
		acquire[i] = func(ctx context.Context) bool {
			for ctx.Err() == nil {
				a := take(ctx)
				switch a.Outcome {
				case benchkit.Granted:
					return true
				case benchkit.Denied:
					sleep(ctx, a.Wait)
				case benchkit.Failed:
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, a.Err)
					sleep(ctx, 10*time.Millisecond)
				}
			}
			return false
		}
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		grants int
		errs   []error
	)
	begin := make(chan struct{})
	start := time.Now().Add(50 * time.Millisecond)
	rctx, cancel := context.WithDeadline(ctx, start.Add(f.o.duration))
	defer cancel()
	for i, acq := range acquire {
		wg.Go(func() {
			<-begin
			n := 0
			for acq(rctx) {
				if err := f.send(rctx, fmt.Sprintf("%s-w%d-%d", f.cred, i, n)); err != nil && rctx.Err() == nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				n++
			}
			mu.Lock()
			grants += n
			mu.Unlock()
		})
	}
	time.Sleep(time.Until(start))
	close(begin)
	wg.Wait()
	if len(errs) > 0 {
		return start, 0, fmt.Errorf("%d workers failed to send, first: %w", len(errs), errs[0])
	}
	if n := failures.Load(); n > 0 {
		return start, 0, fmt.Errorf("%d failed calls to the limiter, first: %v", n, firstFailure.Load())
	}
	perGrant := 0.0
	if f.mode == modeShared && grants > 0 {
		perGrant = float64(meter.Usage().Requests) / float64(grants)
	}
	return start, perGrant, ctx.Err()
}

// send is one push; a 429 is the vendor's business and is only counted (by
// the vendor), as a naive worker that paces itself locally would do.
func (f fleet) send(ctx context.Context, jobID string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, strings.NewReader(`{"rooms":1}`))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+f.cred)
	req.Header.Set("X-Job-Id", jobID)
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
