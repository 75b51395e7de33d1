package limiter

import (
	"context"
	"errors"
	"sync"
	"time"
)

// LeaseGate is a process's front to the fleet's in-flight leases: Wait
// acquires a lease or waits for one, Release frees it or passes it on.
//
// Why a process-local part: the store cannot tell a waiter that a slot was
// released before its expiry, and polling it would cost a write per poll.
// So the waiters of one process queue in order (FIFO), only the first of
// them asks the store (once, and again after the wait AcquireLease
// reports, LeaseBusyError.Recheck: when the earliest lease expires, or
// sooner when every push now under a lease has ended),
// and a release of this process
// hands its slot to the first waiter in the same write (HandOverLease: one
// write for a release and an acquire). A slot freed by another process is
// found by this process's first waiter at the latest when that slot's
// lease would have expired, or when the push under it must have ended. A
// wait that ends before then asks once more as it ends (one ask for the
// waits of the process that end together), so that it leaves with a slot
// freed since or with a fresh answer of when to come back (RetryAfter:
// when a push under a lease likely ends), not one as old as the wait.
//
// So a saturated process keeps its slots busy back to back, at one store
// write per push, or fewer with InFlight.Timeout below Hold (a lease with
// at least Timeout left passes to the next push with no write). A process
// holding none asks the store once each time the earliest lease would
// expire or every push now under a lease has ended (InFlight.Timeout),
// whichever is first, and once as its waits end (per key); never more
// often. The cost is fairness between
// processes: a process with waiters keeps the slots it holds until it has
// no waiter left or a lease lapses (a Timeout below Hold renews a lease
// once it has less than Timeout left, so only a process that stops
// pushing gives its slots up), so with more pushes than slots across the
// fleet, the processes that hold the slots do the pushing.
//
// A LeaseGate is safe for concurrent use; use one per process and lease
// store.
type LeaseGate struct {
	s      LeaseStore
	mu     sync.Mutex
	queues map[string][]*leaseWaiter
	// busyUntil is, per key, when the last acquire that found no slot said
	// to ask again, busyAt when it said so, and recheckAt when a waiter
	// that stays asks again (LeaseBusyError.Recheck).
	busyUntil, busyAt, recheckAt map[string]time.Time
	// asking is, per key, closed when the acquire a waiter is making
	// answers: waiters whose wait ends meanwhile leave with that answer.
	asking map[string]chan struct{}
}

// LeaseStore is where a LeaseGate takes and frees its leases: *Limiter,
// on the fleet's table, or limitertest's in-memory limiter in a unit test.
type LeaseStore interface {
	AcquireLease(ctx context.Context, f InFlight) (Lease, error)
	ReleaseLease(ctx context.Context, lease Lease) error
	HandOverLease(ctx context.Context, lease Lease, f InFlight) (Lease, error)
	// Now is the clock the store stamps its leases with, by which the
	// gate reads their expiries.
	Now() time.Time
}

// NewLeaseGate returns a gate over s's leases (a *Limiter).
func NewLeaseGate(s LeaseStore) *LeaseGate {
	return &LeaseGate{s: s, queues: map[string][]*leaseWaiter{}, busyUntil: map[string]time.Time{}, busyAt: map[string]time.Time{}, recheckAt: map[string]time.Time{}, asking: map[string]chan struct{}{}}
}

type leaseWaiter struct {
	f InFlight
	// handed receives a lease passed on by a release of this process, or
	// an error (the pass failed: ask the store again).
	handed chan handedLease
	// turn wakes the waiter that became first in its queue.
	turn chan struct{}
	// end is when its wait ends.
	end time.Time
}

type handedLease struct {
	lease Lease
	err   error
}

// Wait takes a lease of f, waiting at most maxWait (and not past ctx's
// deadline) for one. It fails at once with the *LeaseBusyError of the
// last acquire when no lease can be had in time: its RetryAfter is when
// to ask again (LeaseBusyError), for a caller that defers the work.
func (g *LeaseGate) Wait(ctx context.Context, f InFlight, maxWait time.Duration) (Lease, error) {
	if err := f.Validate(); err != nil {
		return Lease{}, err
	}
	bound, err := boundWait(ctx, g.s.Now(), maxWait)
	if err != nil {
		return Lease{}, err
	}
	if bound == 0 {
		return g.s.AcquireLease(ctx, f)
	}
	w := &leaseWaiter{f: f, handed: make(chan handedLease, 1), turn: make(chan struct{}, 1), end: g.s.Now().Add(bound)}
	g.enqueue(w)
	var (
		retry *time.Timer // the store's next ask, when a slot likely frees
		busy  *LeaseBusyError
		// again is when the last busy answer said to ask again; final: the
		// wait ended before then, and this is its last ask, claimed as
		// the key's ask in progress (asking).
		again time.Time
		final chan struct{}
	)
	end := time.NewTimer(bound)
	defer end.Stop()
	stop := func() {
		if retry != nil {
			retry.Stop()
		}
	}
	defer stop()
	for {
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C
		}
		select {
		case h := <-w.handed:
			if h.err == nil {
				return h.lease, nil
			}
			// The lease passed to us had expired and was taken: we are no
			// longer queued; ask the store again from the front.
			g.enqueueFront(w)
		case <-w.turn:
			// First in the queue. When the store said a moment ago that no
			// slot is free before some time, a hand-over of this process
			// (which frees nothing) made us first: ask at that time, not now.
			if wait, ok := g.recheckFor(f.Key); ok {
				stop()
				retry = time.NewTimer(wait)
				continue
			}
		case <-retryC:
		case <-end.C:
			if final = g.askAtEnd(ctx, w); final == nil {
				return g.leave(ctx, w, busy, again, f)
			}
		case <-ctx.Done():
			if lease, ok := g.abandon(w); ok {
				_ = g.Release(context.WithoutCancel(ctx), lease)
			}
			return Lease{}, ctx.Err()
		}
		lease, err := g.ask(ctx, f, final)
		if err == nil {
			if g.dequeue(w) {
				return lease, nil
			}
			// A release handed us a slot meanwhile: keep one, pass the other.
			h := <-w.handed
			if h.err == nil {
				_ = g.Release(ctx, h.lease)
			}
			return lease, nil
		}
		if !errors.As(err, &busy) {
			if l, ok := g.abandon(w); ok {
				return l, nil
			}
			return Lease{}, err
		}
		again = g.s.Now().Add(busy.RetryAfter)
		if final != nil {
			return g.leave(ctx, w, busy, again, f)
		}
		// Past the bound the store's answer cannot help, but a release of
		// this process still may, so the wait goes on to the bound.
		stop()
		retry = time.NewTimer(max(busy.RetryAfter, busy.Recheck, time.Millisecond))
	}
}

// ask is an acquire of a waiter of f.Key (the first, or one whose wait
// ended: askAtEnd claimed done for it), whose answer the other waiters
// read: a "no slot" until when, or a slot (none known busy).
func (g *LeaseGate) ask(ctx context.Context, f InFlight, done chan struct{}) (Lease, error) {
	if done == nil {
		done = make(chan struct{})
		g.mu.Lock()
		g.asking[f.Key] = done
		g.mu.Unlock()
	}
	lease, err := g.s.AcquireLease(ctx, f)
	var busy *LeaseBusyError
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case err == nil:
		delete(g.busyUntil, f.Key)
		delete(g.busyAt, f.Key)
		delete(g.recheckAt, f.Key)
	case errors.As(err, &busy):
		now := g.s.Now()
		g.busyUntil[f.Key], g.busyAt[f.Key] = now.Add(busy.RetryAfter), now
		g.recheckAt[f.Key] = now.Add(max(busy.RetryAfter, busy.Recheck))
	}
	if g.asking[f.Key] == done {
		delete(g.asking, f.Key)
	}
	close(done)
	return lease, err
}

// askAtEnd is, for w whose wait ended, the ask it makes before it
// leaves, claimed (nil: none). A wait leaves with an answer of the store
// said no earlier than its end: a slot another process freed since, or
// when to come back, not one up to the whole wait old. The waits of a
// process that end together share one ask: the others wait for it and
// leave with its "no", or, when it took a slot, ask in turn (another
// may be free).
func (g *LeaseGate) askAtEnd(ctx context.Context, w *leaseWaiter) chan struct{} {
	key := w.f.Key
	for {
		g.mu.Lock()
		done := g.asking[key]
		if done == nil {
			defer g.mu.Unlock()
			until, no := g.busyUntil[key]
			if now := g.s.Now(); no && until.After(now) && !g.busyAt[key].Before(w.end) {
				return nil
			}
			done = make(chan struct{})
			g.asking[key] = done
			return done
		}
		g.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil
		}
	}
}

// Contended reports whether a lease of key is likely waited for now: a
// push of this process already waits for one, or the store said a moment
// ago that none is free until some time still to come. A caller that
// books something only the lease's holder can spend (a token for the
// request) books it after the lease while this holds, so that the wait
// cannot make it stale.
func (g *LeaseGate) Contended(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queues[key]) > 0 {
		return true
	}
	// Until a waiter that stays would ask again: a slot that likely freed
	// since (busyUntil) is as likely passed on within its process.
	until, ok := g.recheckAt[key]
	return ok && until.After(g.s.Now())
}

// leave ends a wait that ran out: the lease handed over meanwhile if one
// was, else the process's last "no slot" for the key, saying what is left
// of it (busy, its own last answer, asked again at again, when the last
// was a slot and none has answered since; or a fresh one when no acquire
// was made).
func (g *LeaseGate) leave(ctx context.Context, w *leaseWaiter, busy *LeaseBusyError, again time.Time, f InFlight) (Lease, error) {
	if lease, ok := g.abandon(w); ok {
		return lease, nil
	}
	if _, shared := g.busyFor(f.Key); shared || busy == nil {
		// The latest answer of this process, this waiter's own or
		// another's since.
		busy = g.lastBusy(f)
	} else {
		left := *busy
		left.RetryAfter = max(again.Sub(g.s.Now()), 0)
		busy = &left
	}
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	return Lease{}, busy
}

// Release frees lease, or hands it to the first waiter of this process
// whose max still covers the slot. A hand-over that finds the lease lost
// (it expired and was taken) sends that waiter back to the store and
// reports ErrLeaseLost, as ReleaseLease does.
func (g *LeaseGate) Release(ctx context.Context, lease Lease) error {
	w := g.next(lease)
	if w == nil {
		g.clearBusy(lease.Key)
		return g.s.ReleaseLease(ctx, lease)
	}
	if now := g.s.Now(); lease.Expires.Sub(now) >= w.f.need() {
		// Enough of the lease is left for the waiter's whole push: the
		// store already shows the slot held until Expires, by this
		// process, so passing it costs nothing. Its push takes it now,
		// which its release tells the store (limiter.Lease.Acquired).
		lease.Acquired = now
		w.handed <- handedLease{lease: lease}
		return nil
	}
	next, err := g.s.HandOverLease(ctx, lease, w.f)
	w.handed <- handedLease{lease: next, err: err}
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		// The store failed: the slot may still be ours; free it, or it
		// frees itself at Expires.
		_ = g.s.ReleaseLease(ctx, lease)
	}
	return err
}

func (g *LeaseGate) enqueue(w *leaseWaiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := append(g.queues[w.f.Key], w)
	g.queues[w.f.Key] = q
	if len(q) == 1 {
		w.turn <- struct{}{}
	}
}

func (g *LeaseGate) enqueueFront(w *leaseWaiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queues[w.f.Key] = append([]*leaseWaiter{w}, g.queues[w.f.Key]...)
	select {
	case w.turn <- struct{}{}:
	default:
	}
}

// next pops the first waiter of lease's key that may take its slot, and
// wakes the one behind it, now first, to ask the store (another slot may
// be free).
func (g *LeaseGate) next(lease Lease) *leaseWaiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[lease.Key]
	if len(q) == 0 || q[0].f.Max <= lease.Slot {
		return nil
	}
	w := q[0]
	g.remove(lease.Key, 0)
	return w
}

// dequeue removes w after its own acquire; false if a release already
// popped it (a lease is then on its way on w.handed).
func (g *LeaseGate) dequeue(w *leaseWaiter) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, x := range g.queues[w.f.Key] {
		if x == w {
			g.remove(w.f.Key, i)
			return true
		}
	}
	return false
}

// abandon removes w from its queue; if a release popped it first, it
// returns the lease that release handed over.
func (g *LeaseGate) abandon(w *leaseWaiter) (Lease, bool) {
	if g.dequeue(w) {
		return Lease{}, false
	}
	h := <-w.handed
	return h.lease, h.err == nil
}

// remove drops queue key's i-th waiter; the caller holds g.mu. A new first
// waiter is woken to take its turn at the store.
func (g *LeaseGate) remove(key string, i int) {
	q := g.queues[key]
	q = append(q[:i], q[i+1:]...)
	if len(q) == 0 {
		delete(g.queues, key)
		return
	}
	g.queues[key] = q
	if i == 0 {
		select {
		case q[0].turn <- struct{}{}:
		default:
		}
	}
}

func (g *LeaseGate) lastBusy(f InFlight) *LeaseBusyError {
	g.mu.Lock()
	until, ok := g.busyUntil[f.Key]
	g.mu.Unlock()
	// With no "no slot" known, the last this process learned is a slot
	// free (taken by an acquire, or released): ask again at once.
	wait := time.Duration(0)
	if now := g.s.Now(); ok && until.After(now) {
		wait = until.Sub(now)
	}
	return &LeaseBusyError{Key: f.Key, Max: f.Max, Held: f.Max, RetryAfter: wait}
}

// busyFor is how long until the store's last "no slot" for key runs out,
// if it has not.
func (g *LeaseGate) busyFor(key string) (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.busyUntil[key]
	if d := until.Sub(g.s.Now()); ok && d > 0 {
		return d, true
	}
	return 0, false
}

// clearBusy forgets the last "no slot" for key: a slot was free since, and
// the next first waiter asks the store at once.
func (g *LeaseGate) clearBusy(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.busyUntil, key)
	delete(g.busyAt, key)
	delete(g.recheckAt, key)
}

// recheckFor is how long until a waiter that stays asks the store again
// for key, after its last "no slot", if that time has not come.
func (g *LeaseGate) recheckFor(key string) (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.recheckAt[key]
	if d := until.Sub(g.s.Now()); ok && d > 0 {
		return d, true
	}
	return 0, false
}
