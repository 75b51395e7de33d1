package benchkit

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// Outcome is what one attempt to get a token came to.
type Outcome int

const (
	// Granted: the caller holds a token.
	Granted Outcome = iota
	// Denied: no token; Attempt.Wait says when to ask again.
	Denied
	// Conflict: the attempt lost a race with another worker (an optimistic
	// write refused); ask again at once.
	Conflict
	// Failed: an error other than a denial.
	Failed
	// Stopped: the run's context ended during the attempt.
	Stopped
)

// Attempt is the result of one Taker call.
type Attempt struct {
	Outcome Outcome
	// At is, for a grant, the time on the bucket's clock the token counts
	// from (a reservation's slot, a take's own now); zero means "when the
	// call returned". Windows are measured on these, so that the latency
	// of the call that reports a grant does not blur them.
	At   time.Time
	Wait time.Duration
	Err  error
}

// Taker asks a bucket for one token, the way one kind of client does.
// Each worker of a fleet has its own Taker, with its own client and limiter
// instance, so workers share nothing but the store.
type Taker func(ctx context.Context) Attempt

// SDKWait is a fleetbucket worker using Wait: reserve a slot (at most
// maxWait ahead, and never past ctx's deadline) and sleep until it.
func SDKWait(l *limiter.Limiter, b limiter.Bucket, maxWait time.Duration) Taker {
	return func(ctx context.Context) Attempt {
		r, err := l.Wait(ctx, b, 1, maxWait)
		return sdkAttempt(ctx, r, err)
	}
}

// SDKTake is a fleetbucket worker using Take: a token now, or a denial
// whose RetryAfter the fleet loop sleeps before taking again.
func SDKTake(l *limiter.Limiter, b limiter.Bucket) Taker {
	return func(ctx context.Context) Attempt {
		r, err := l.Take(ctx, b, 1)
		return sdkAttempt(ctx, r, err)
	}
}

func sdkAttempt(ctx context.Context, r limiter.Reservation, err error) Attempt {
	if err == nil {
		return Attempt{Outcome: Granted, At: r.Slot}
	}
	if wait, denied := limiter.RetryAfter(err); denied {
		return Attempt{Outcome: Denied, Wait: wait}
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Attempt{Outcome: Stopped, Err: err}
	}
	return Attempt{Outcome: Failed, Err: err}
}

// FleetResult is what a fleet run granted.
type FleetResult struct {
	Workers int
	// Elapsed runs from the common start to the last worker's stop.
	Elapsed time.Duration
	// Grants are the grant times (Attempt.At), in order.
	Grants []time.Time
	// GrantsPerWorker is each worker's share.
	GrantsPerWorker []int
	// Attempts counts every Taker call; Denials, Conflicts and Failures the
	// ones that came to that.
	Attempts, Denials, Conflicts, Failures int
	// FirstError is the first Failed attempt's error.
	FirstError error
}

// Allowed is what a bucket of limit l may grant over the run: burst + rate·T.
func (r FleetResult) Allowed(l limiter.Limit) float64 {
	return window.Limit{Rate: l.Rate, Burst: l.Burst}.Bound(r.Elapsed)
}

// OverBound is the fullest window of the run as a fraction of what the
// bucket allows in it: the largest (grants in [a, b]) ÷ (burst + rate·(b−a))
// over all pairs of grants, by package window (the mock OTA's check, which
// shares no code with sdk/gcra). Above 1 the fleet broke the limit somewhere.
func (r FleetResult) OverBound(l limiter.Limit) float64 {
	w, _ := window.Fullest(r.Grants, window.Limit{Rate: l.Rate, Burst: l.Burst})
	return w.Ratio()
}

// RunFleet starts every taker at the same instant and lets each take
// tokens, as fast as its answers allow, until d has passed: a denied worker
// sleeps the wait it was given (take-and-retry), a worker that lost a race
// asks again at once, a failed one pauses 10 ms. A Taker sees a context
// whose deadline is the end of the run.
func RunFleet(ctx context.Context, takers []Taker, d time.Duration) FleetResult {
	res := FleetResult{Workers: len(takers), GrantsPerWorker: make([]int, len(takers))}
	var mu sync.Mutex
	start := make(chan struct{})
	var wg sync.WaitGroup
	var begin time.Time
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i, take := range takers {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithDeadline(runCtx, begin.Add(d))
			defer cancel()
			var grants []time.Time
			var attempts, denials, conflicts, failures int
			var firstErr error
			for ctx.Err() == nil {
				a := take(ctx)
				attempts++
				switch a.Outcome {
				case Granted:
					at := a.At
					if at.IsZero() {
						at = time.Now()
					}
					grants = append(grants, at)
				case Denied:
					denials++
					sleep(ctx, a.Wait)
				case Conflict:
					conflicts++
				case Failed:
					failures++
					if firstErr == nil {
						firstErr = a.Err
					}
					sleep(ctx, 10*time.Millisecond)
				case Stopped:
					attempts--
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.Grants = append(res.Grants, grants...)
			res.GrantsPerWorker[i] = len(grants)
			res.Attempts += attempts
			res.Denials += denials
			res.Conflicts += conflicts
			res.Failures += failures
			if res.FirstError == nil {
				res.FirstError = firstErr
			}
		})
	}
	begin = time.Now()
	close(start)
	wg.Wait()
	res.Elapsed = time.Since(begin)
	sort.Slice(res.Grants, func(i, j int) bool { return res.Grants[i].Before(res.Grants[j]) })
	return res
}

func sleep(ctx context.Context, d time.Duration) { _ = ctxsleep.Sleep(ctx, d) }
