package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// In-flight leases (Route.InFlight, connections' "max_in_flight").
//
// A vendor that allows N requests at once counts what is in flight at its
// end, whichever worker sent it. A push takes a lease just before its
// request and gives it back when the answer is in: at most two
// conditional writes per push (limiter.LeaseGate: acquire and release, or
// one write for both when the lease passes to a waiter of the same
// process).
//
// Which comes first, the token or the lease, depends on whether the lease
// is waited for. A slot is spendable only within its grace (spendable):
// past it, the vendor's window would count the request beside the slots
// granted since. So while this process knows the lease set is contended
// (LeaseGate.Contended: pushes of it already queue for a lease, or the
// store said a moment ago that none is free; or more of its pushes go for
// a lease now than the max, a burst none of which queued yet: Leases.join,
// crowded), or the job's last push found none free (job.LeaseBusy, set
// as it was deferred for one: the process that takes it up next may have
// taken no lease of the set lately), a push takes its lease
// first and books its token after it (decide: situation.reserve), and spends the token at once: a
// token booked first would go stale in the wait, and the push would book
// a second one under the lease (the first wasted, one more write and its
// round trip with the vendor's concurrency idle). A token further off
// than its grace, or one its reservation sleeps for (a horizon's denial, a
// quota route's next token: sleepForToken), is not waited for under the
// lease, which would idle the vendor's concurrency: the lease goes back,
// and the push waits for one at its slot, or is deferred with the slot,
// as below. Otherwise
// (a free lease is likely, or a shadow route, which pushes at once) the
// token comes first, so that its booking is never inside the lease.
//
// A push that finds no free lease waits for one within the call's hold
// (Policy.MaxHold, or the shorter hold the caller gave Do or Run) and the
// invocation's deadline, as it sleeps
// for a slot: the gate queues it and wakes it when a push of this process
// releases one, or asks the store again at the earliest expiry or after
// one push's time, and once more as the wait ends.
// A token it took first is spent by its push, only later, within the
// slot's grace (past it, the request books a fresh token: spendable).
// Past the hold the job is deferred like a slot beyond blocking distance,
// with its slot if it took one, to come back when the store's answer as
// the wait ended says: when a push under a lease likely ends (the last
// released push's time), at the latest when the earliest lease expires or
// after one push's Timeout (by then every push now under a lease has
// ended; a lease_hold far above push_timeout is the crash bound, not the
// wait); a slot that has passed its grace by then is booked again, as for
// any late job.
//
// The push runs under its lease's deadline (context.WithDeadline: now +
// InFlight.Timeout, the push's time and the lease's slack, or the lease's
// expiry if sooner), so it never outlives the lease: a lease another
// worker takes after the expiry never overlaps this push's request. The
// push's own budget (push_timeout) ends first: a lease taken before the
// token with less than Timeout left is swapped for a fresh one. Should the
// lease's deadline end the push all the same, the push failed (the vendor
// did not answer in its time: decideFailure), unlike the call's own
// context ending. A worker that dies mid-push
// frees its slot when the lease expires, at most Hold after it was taken.
// With Timeout below Hold, a lease with at least Timeout left passes to
// the next push of the process with no write (limiter.InFlight.Timeout).

// Leases is a process's in-flight leases, and the bounds vendors publish
// on them (a RateLimit-Policy in concurrent-requests, see Publish). Use one
// per process, over one *limiter.LeaseGate.
type Leases struct {
	Gate *limiter.LeaseGate

	mu sync.Mutex
	// published is, per lease key, the last concurrency the vendor
	// published; it lowers the configured max, never raises it.
	published map[string]int
	// going is, per lease key, how many pushes of this process are being
	// served towards a lease of it (join): more than its max, and one of
	// them will wait, before any queues at the gate (a burst of pushes).
	going map[string]int
}

// NewLeases returns the leases of gate.
func NewLeases(gate *limiter.LeaseGate) *Leases {
	return &Leases{Gate: gate, published: map[string]int{}, going: map[string]int{}}
}

// Publish records the concurrency a vendor published for the bucket key
// (a RateLimit-Policy with qu=concurrent-requests; otapush.WithConcurrency
// calls it): the effective max_in_flight of the key is the lower of it and
// the configured one, so a vendor may lower the bound and raise it back up
// to the configuration, never above. A shard's key counts for its bucket.
func (l *Leases) Publish(key string, n int) {
	if n < 1 {
		return
	}
	key, _, _ = strings.Cut(key, limiter.ShardSeparator)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.published[key] = n
}

// join counts a push of this process towards a lease of key until leave.
func (l *Leases) join(key string) (leave func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.going[key]++
	return sync.OnceFunc(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.going[key]--; l.going[key] <= 0 {
			delete(l.going, key)
		}
	})
}

// crowded reports whether a push of f, joined, would likely wait for its
// lease: the gate knows the set contended, or more pushes of this process
// than f.Max go for a lease of it now.
func (l *Leases) crowded(f limiter.InFlight) bool {
	if l.Gate.Contended(f.Key) {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.going[f.Key] > f.Max
}

// Effective is f with its Max lowered to what the vendor last published.
func (l *Leases) Effective(f limiter.InFlight) limiter.InFlight {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := l.published[f.Key]; ok && n < f.Max {
		f.Max = n
	}
	return f
}

// heldLease is a push's in-flight lease, taken and not yet released.
type heldLease struct {
	lease   limiter.Lease
	timeout time.Duration // the push's budget (InFlight.Timeout)
	max     int           // the InFlight.Max it was acquired under
	// release frees the lease; safe to call more than once.
	release func()
}

// firstLease is the in-flight lease a job took before its token
// (actLeaseFirst), while serve holds it (none: held is nil). serve hands it to the reservation:
// one that sleeps for its token frees it first. leave uncounts the push
// from those going for a lease (Leases.join, actJoinLease).
type firstLease struct {
	held  *heldLease
	leave func()
}

// holds reports whether a lease is held (f may be nil: no lease).
func (f *firstLease) holds() bool { return f != nil && f.held != nil }

// free gives the lease back, if one is held (f may be nil: no lease).
func (f *firstLease) free() {
	if f != nil && f.held != nil {
		f.held.release()
		f.held = nil
	}
}

// end frees the lease, if one is held, and uncounts the push.
func (f *firstLease) end() {
	if f.held != nil {
		f.free()
	}
	if f.leave != nil {
		f.leave()
	}
}

// sleepForToken sleeps wait for a token the bucket has not yet, freeing
// first a lease the job took before its token: the vendor's concurrency
// would idle under it, and the push takes one again at its slot.
func (d *Dispatcher) sleepForToken(ctx context.Context, wait time.Duration, first *firstLease) error {
	first.free()
	return d.sleep(ctx, wait)
}

// acquire takes route's in-flight lease for j's push, waiting within the
// call's hold. ok is false when the push does not go out now: res and err
// are then what became of j (deferred, or dead-lettered for a route the
// dispatcher cannot lease for).
func (d *Dispatcher) acquire(ctx context.Context, j job.Job, t *task) (held *heldLease, ok bool, res Result, err error) {
	if d.Leases == nil {
		res, err := d.deadLetter(ctx, j, t, DeadLettered, "route has max_in_flight, but the dispatcher has no Leases (set Dispatcher.Leases to dispatch.NewLeases(limiter.NewLeaseGate(lim)))")
		return nil, false, res, err
	}
	f := d.Leases.Effective(*t.InFlight)
	lease, err := d.Leases.Gate.Wait(ctx, f, d.holdLeft(ctx, t))
	if err != nil {
		res, err = d.leaseRefused(ctx, j, t, err)
		return nil, false, res, err
	}
	release := sync.OnceFunc(func() {
		if err := d.Leases.Gate.Release(context.WithoutCancel(ctx), lease); err != nil {
			// Lost: it expired first (the push outlived lease_hold).
			// Otherwise the slot frees itself at its expiry.
			d.log().Warn("releasing an in-flight lease failed", "job_id", j.ID, "lease", lease.Key, "slot", lease.Slot, "err", err)
		}
	})
	return &heldLease{lease: lease, timeout: f.Timeout, max: f.Max, release: release}, true, Result{}, nil
}

// lease takes t's in-flight lease for j's push, or uses held, the lease
// the push took before its token (actLeaseFirst). ok is false when the push
// does not go out now: res and err are then what became of j. With ok,
// the push runs under run.ctx, which ends at the lease's expiry, names
// run.lease on its requests, and calls run.release once the answer is
// in. A route with no InFlight goes out under ctx itself, with no lease.
func (d *Dispatcher) lease(ctx context.Context, j job.Job, t *task, held *heldLease) (run settle, ok bool, res Result, err error) {
	if t.InFlight = d.inFlight(t); t.InFlight == nil {
		return settle{ctx: ctx, base: ctx, release: func() {}}, true, Result{}, nil
	}
	if held != nil && (held.lease.Expires.Sub(d.now()) < held.timeout || held.max > d.Leases.Effective(*t.InFlight).Max) {
		// Taken before its token, the lease has too little left for the
		// push's time: the push would end with the lease, before its own
		// budget does. Or it was taken under a larger Max than the cap the
		// token's answer told of since (learncap.go): the set's bound is
		// the largest Max an acquirer passes. It takes a fresh one.
		held.release()
		held = nil
	}
	if held == nil {
		if held, ok, res, err = d.acquire(ctx, j, t); !ok {
			return settle{}, false, res, err
		}
	}
	// The budget counts from the request, but never past the lease: a
	// lease taken before the token has spent the booking already.
	lctx, cancel := context.WithDeadline(ctx, held.lease.Deadline(d.now(), held.timeout))
	lease := held.lease
	return settle{ctx: lctx, base: ctx, lease: &lease, release: func() {
		cancel()
		held.release()
	}}, true, Result{}, nil
}

// leaseRefused disposes of j, whose push found no lease within the hold
// (deferred to when the gate says to ask again: LeaseBusyError), or whose gate
// failed (deferred for the store cooldown, failing closed).
func (d *Dispatcher) leaseRefused(ctx context.Context, j job.Job, t *task, err error) (Result, error) {
	var busy *limiter.LeaseBusyError
	switch {
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	case errors.As(err, &busy):
		j.LeaseBusy = true
		return d.deferJob(ctx, j, t, busy.RetryAfter, fmt.Sprintf("%d of %d in-flight leases held", busy.Held, busy.Max))
	case errors.Is(err, limiter.ErrInvalidArgument):
		return d.deadLetter(ctx, j, t, DeadLettered, "route has an invalid max_in_flight: "+err.Error())
	}
	cooldown := d.Policy.StoreCooldown
	var open *breaker.OpenError
	if errors.As(err, &open) {
		cooldown = max(cooldown, open.RetryAfter)
	}
	d.log().Warn("in-flight lease unavailable; deferring (fail closed)", "job_id", j.ID, "lease", t.InFlight.Key, "err", err)
	res, derr := d.deferJob(ctx, j, t, cooldown, "in-flight lease unavailable: "+err.Error())
	res.StoreError = true
	return res, derr
}

// holdLeft is how long a push may wait in process now: to the end of the
// call's hold, and DeadlineMargin before the invocation's deadline.
func (d *Dispatcher) holdLeft(ctx context.Context, t *task) time.Duration {
	now := d.now()
	left := d.Policy.MaxHold
	if !t.hold.IsZero() {
		left = t.hold.Sub(now)
	}
	if deadline, ok := ctx.Deadline(); ok {
		left = min(left, deadline.Add(-d.Policy.DeadlineMargin).Sub(now))
	}
	return max(left, 0)
}
