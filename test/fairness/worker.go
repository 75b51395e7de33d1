package fairness

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
)

// WorkerReport is what one worker process prints on stdout, one JSON line,
// when its run ends. The driver trusts it for DynamoDB counts only; pushes
// are counted again by the vendor.
type WorkerReport struct {
	Process int `json:"process"`
	// Pushes are the pushes that ended accepted, PerPusher each pusher's.
	Pushes    int   `json:"pushes"`
	PerPusher []int `json:"per_pusher"`
	// Attempts are HTTP requests sent, Throttled those answered 429.
	Attempts  int `json:"attempts"`
	Throttled int `json:"throttled_429"`
	// Grants are tokens the limiter granted (one per attempt), Contended
	// and Exhausted the Wait calls that ended in limiter.ErrContended or a
	// denial.
	Grants    int64 `json:"grants"`
	Contended int64 `json:"contended"`
	Exhausted int64 `json:"exhausted"`
	// Unspent are grants Wait booked and left unspent because each came
	// back later than the bucket's margin allows (limiter.Late).
	Unspent int64 `json:"unspent_late"`
	// Deferrals are pushes that came back as *otapush.DeferError; the
	// pusher then sleeps its After (capped at the end of the run), as a job
	// deferred on SQS would wait. MaxDeferMillis is the longest After.
	Deferrals      int   `json:"deferrals"`
	MaxDeferMillis int64 `json:"max_defer_ms"`
	// Slots are the granted reservations' slots (unix µs): when the limiter
	// said each token was due, to tell its windows from the vendor's.
	Slots []int64 `json:"slots_us"`
	// DynamoDB counts, by this process's own meter: every request sent,
	// the conditional writes decided, and those whose condition failed.
	Requests int64 `json:"dynamodb_requests"`
	// Calls are the limiter's DynamoDB calls as a wrapper around the client
	// saw them, ColdCalls the part made by each pusher's first Wait (its
	// process's cache still cold) and ColdGrants the first Waits granted.
	Calls      int64 `json:"dynamodb_calls"`
	ColdCalls  int64 `json:"dynamodb_cold_calls"`
	ColdGrants int64 `json:"cold_grants"`
	// Leased are the grants a lease made with no write (leased shares).
	Leased          int64 `json:"leased,omitempty"`
	Writes          int64 `json:"dynamodb_writes"`
	ConditionFailed int64 `json:"dynamodb_condition_failed"`
	// Errors are pushes that failed otherwise (permanent, or the store).
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// FromSlotMicros are, per request sent, how long after its grant's
	// slot it left otapush; FromWriteMicros, for grants due at once, how
	// long after the grant's write returned.
	FromSlotMicros  []int64 `json:"from_slot_us"`
	SentSlots       []int64 `json:"sent_slots_us"` // the slot of each FromSlotMicros
	FromWriteMicros []int64 `json:"from_write_us"`
}

// callCounter counts the limiter's DynamoDB calls, and apart those made
// under a cold-marked context.
type callCounter struct {
	*dynamodb.Client
	calls, cold atomic.Int64
}

// storeColdKey marks the context of a pusher's first Wait.
type storeColdKey struct{}

func (c *callCounter) count(ctx context.Context) {
	c.calls.Add(1)
	if ctx.Value(storeColdKey{}) != nil {
		c.cold.Add(1)
	}
}

func (c *callCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.count(ctx)
	out, err := c.Client.UpdateItem(ctx, in, o...)
	clockOf(ctx).written(time.Now())
	return out, err
}

func (c *callCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.count(ctx)
	return c.Client.GetItem(ctx, in, o...)
}

// pusherKey carries a pusher's "first Wait still to come" flag.
type pusherKey struct{}

// countingLimiter counts what Wait came to.
type countingLimiter struct {
	*limiter.Limiter
	grants, contended, exhausted, coldGrants, unspent, leased atomic.Int64

	mu    sync.Mutex
	slots []int64
}

func (c *countingLimiter) Wait(ctx context.Context, b limiter.Bucket, n int, maxWait time.Duration) (limiter.Reservation, error) {
	cold := false
	if first, ok := ctx.Value(pusherKey{}).(*atomic.Bool); ok && first.Swap(false) {
		cold, ctx = true, context.WithValue(ctx, storeColdKey{}, true)
	}
	r, err := c.Limiter.Wait(ctx, b, n, maxWait)
	var late *limiter.LateGrantError
	switch {
	case err == nil:
		c.grants.Add(1)
		if r.Leased {
			c.leased.Add(1)
		}
		c.unspent.Add(int64(r.Unspent))
		if cold {
			c.coldGrants.Add(1)
		}
		c.mu.Lock()
		c.slots = append(c.slots, r.Slot.UnixMicro())
		c.mu.Unlock()
		clockOf(ctx).granted(r.Slot)
	case errors.Is(err, limiter.ErrContended):
		c.contended.Add(1)
	case errors.Is(err, limiter.ErrExhausted):
		c.exhausted.Add(1)
	case errors.As(err, &late):
		c.unspent.Add(int64(late.Grants))
	}
	return r, err
}

type workerFlags struct {
	process, pushers int
	ota, table, key  string
	credential       string
	rate             float64
	burst            int
	margin           time.Duration
	start            int64 // unix ms
	duration         time.Duration
	// share, if its fraction is set, gives the bucket leased shares;
	// offset and life (0: the whole run) are when this process pushes.
	shareFraction float64
	shareLeases   int
	shareEpoch    time.Duration
	offset, life  time.Duration
	pause         time.Duration // between a pusher's pushes
	gentle        time.Duration // for how long the pause holds (0: all along)
}

func (f *workerFlags) args() []string {
	return []string{
		"-process", fmt.Sprint(f.process), "-pushers", fmt.Sprint(f.pushers), "-ota", f.ota, "-table", f.table,
		"-key", f.key, "-credential", f.credential, "-rate", fmt.Sprint(f.rate), "-burst", fmt.Sprint(f.burst),
		"-margin", f.margin.String(), "-start", fmt.Sprint(f.start), "-duration", f.duration.String(),
		"-share-fraction", fmt.Sprint(f.shareFraction), "-share-leases", fmt.Sprint(f.shareLeases), "-share-epoch", f.shareEpoch.String(),
		"-offset", f.offset.String(), "-life", f.life.String(), "-pause", f.pause.String(), "-gentle", f.gentle.String(),
	}
}

// WorkerMain is one worker process: it parses the flags the driver passed,
// waits for the common start, runs its pushers until start + duration, and
// prints its WorkerReport. It returns the exit code.
func WorkerMain(args []string, stdout, stderr io.Writer) int {
	var f workerFlags
	fs := flag.NewFlagSet("fairness worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.process, "process", 0, "this process's index")
	fs.IntVar(&f.pushers, "pushers", 5, "concurrent pushers")
	fs.StringVar(&f.ota, "ota", "", "the vendor's base URL")
	fs.StringVar(&f.table, "table", "", "the limiter table")
	fs.StringVar(&f.key, "key", "", "the bucket key")
	fs.StringVar(&f.credential, "credential", "fairness", "the bearer credential")
	fs.Float64Var(&f.rate, "rate", 20, "bucket rate per second")
	fs.IntVar(&f.burst, "burst", 40, "bucket burst")
	fs.DurationVar(&f.margin, "margin", 0, "the bucket's margin (limiter.Limit.Margin)")
	fs.Int64Var(&f.start, "start", 0, "common start, unix milliseconds")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long to push")
	fs.Float64Var(&f.shareFraction, "share-fraction", 0, "leased shares' fraction of the rate (0: none)")
	fs.IntVar(&f.shareLeases, "share-leases", 0, "leases per epoch")
	fs.DurationVar(&f.shareEpoch, "share-epoch", 0, "the leases' epoch")
	fs.DurationVar(&f.offset, "offset", 0, "how long after the start this process starts pushing")
	fs.DurationVar(&f.life, "life", 0, "how long this process pushes (0: until the run's end)")
	fs.DurationVar(&f.pause, "pause", 0, "how long a pusher waits after each push")
	fs.DurationVar(&f.gentle, "gentle", 0, "for how long after this process's start it pauses (0: all along)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if f.ota == "" || f.table == "" || f.key == "" || f.pushers < 1 || f.start == 0 {
		fmt.Fprintln(stderr, "fairness worker: -ota, -table, -key, -start and -pushers ≥ 1 are required")
		return 2
	}
	rep, err := runWorker(context.Background(), f)
	if err != nil {
		fmt.Fprintf(stderr, "fairness worker %d: %v\n", f.process, err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(rep); err != nil {
		return 1
	}
	return 0
}

func runWorker(ctx context.Context, f workerFlags) (WorkerReport, error) {
	rep := WorkerReport{Process: f.process, PerPusher: make([]int, f.pushers)}
	cfg, err := benchkit.Config(ctx)
	if err != nil {
		return rep, err
	}
	meter := &benchkit.Meter{}
	store := &callCounter{Client: dynamodb.NewFromConfig(cfg, meter.Option(), benchkit.ForEmulator)}
	l, err := limiter.New(store, limiter.WithTable(f.table))
	if err != nil {
		return rep, err
	}
	lim := &countingLimiter{Limiter: l}
	lat := &latencies{}
	hc := &http.Client{Transport: timedTransport{next: http.DefaultTransport, lat: lat}}
	push, err := otapush.New(hc, lim, otapush.DefaultPolicy, otapush.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return rep, err
	}
	bucket := limiter.Bucket{Key: f.key, Limit: limiter.Limit{Rate: f.rate, Burst: f.burst, Margin: f.margin}}
	if f.shareFraction > 0 {
		bucket.Share = &limiter.Share{Fraction: f.shareFraction, Leases: f.shareLeases, Epoch: f.shareEpoch}
	}
	if err := bucket.Validate(); err != nil {
		return rep, err
	}
	start := time.UnixMilli(f.start)
	end := start.Add(f.duration)
	if f.life > 0 && start.Add(f.offset+f.life).Before(end) {
		end = start.Add(f.offset + f.life)
	}
	start = start.Add(f.offset)
	if err := ctxsleep.Sleep(ctx, time.Until(start)); err != nil {
		return rep, err
	}
	// Pushers start pushes until end (runCtx); a push started before it
	// runs to its own end under ctx, so that no Wait is cut short by the
	// run's deadline and reported as a denial: every deferral counted is
	// one the push client chose.
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()

	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range f.pushers {
		wg.Go(func() {
			first := &atomic.Bool{}
			first.Store(true)
			ctx := context.WithValue(context.WithValue(ctx, pusherKey{}, first), grantClockKey{}, &grantClock{})
			for n := 0; runCtx.Err() == nil; n++ {
				resp, err := push.Push(ctx, otapush.Request{
					Bucket: bucket, URL: f.ota + "/v1/availability",
					JobID:  fmt.Sprintf("p%d-w%d-%d", f.process, p, n),
					Body:   []byte(fmt.Sprintf(`{"process":%d,"pusher":%d,"n":%d}`, f.process, p, n)),
					Header: http.Header{"Authorization": {"Bearer " + f.credential}},
				})
				var later *otapush.DeferError
				mu.Lock()
				rep.Attempts += resp.Attempts
				rep.Throttled += resp.Throttled
				switch {
				case err == nil:
					rep.Pushes++
					rep.PerPusher[p]++
				case errors.As(err, &later):
					rep.Deferrals++
					rep.MaxDeferMillis = max(rep.MaxDeferMillis, later.After.Milliseconds())
				default:
					rep.Errors++
					if rep.FirstError == "" {
						rep.FirstError = err.Error()
					}
				}
				mu.Unlock()
				if later != nil {
					// The job would come back from the deferred queue After
					// from now; within this run, the pusher waits for it.
					_ = ctxsleep.Sleep(runCtx, later.After)
				} else if err != nil && runCtx.Err() == nil {
					_ = ctxsleep.Sleep(runCtx, 10*time.Millisecond)
				} else if f.pause > 0 && f.gentle == 0 {
					_ = ctxsleep.Sleep(runCtx, f.pause)
				} else if left := time.Until(start.Add(f.gentle)); f.pause > 0 && left > 0 {
					_ = ctxsleep.Sleep(runCtx, min(f.pause, left))
				}
			}
		})
	}
	wg.Wait()
	u := meter.Usage()
	rep.Grants, rep.Contended, rep.Exhausted, rep.Unspent = lim.grants.Load(), lim.contended.Load(), lim.exhausted.Load(), lim.unspent.Load()
	rep.Requests, rep.Writes, rep.ConditionFailed = u.Requests, u.Writes, u.ConditionFailed
	rep.Slots = lim.slots
	rep.FromSlotMicros, rep.FromWriteMicros, rep.SentSlots = lat.fromSlot, lat.fromWrite, lat.slots
	rep.Calls, rep.ColdCalls, rep.ColdGrants = store.calls.Load(), store.cold.Load(), lim.coldGrants.Load()
	rep.Leased = lim.leased.Load()
	return rep, nil
}
