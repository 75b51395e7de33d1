package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// contendedRetries bounds the prompt retries of a reservation whose writes
// all lost races: contention is not exhaustion, and the bucket may well
// have a slot for the next attempt.
const contendedRetries = 3

// reserve books a slot for j, bounded by its deadline. done reports that
// the job was disposed of (shed or deferred) instead. first is the lease
// j took before its token, if any (nil: none), which a sleep for the token
// frees.
func (d *Dispatcher) reserve(ctx context.Context, j job.Job, t *task, now time.Time, first *firstLease) (booking, error) {
	maxDelay, bound := d.Policy.MaxReserve, noBound
	if t.Horizon > 0 {
		maxDelay = min(maxDelay, t.Horizon)
	}
	if !j.Deadline.IsZero() && j.Deadline.Sub(now) <= maxDelay {
		maxDelay, bound = j.Deadline.Sub(now), deadlineBound
	}
	maxAge, _ := d.lifetime(t.Route)
	if left := j.FirstSeen.Add(maxAge).Sub(now); left < maxDelay {
		maxDelay, bound = left, maxAgeBound
	}
	if maxDelay < 0 {
		// The bound passed while the job slept for a horizon's next
		// token: no slot can come before it.
		res, err := d.unbookable(ctx, j, t, bound, maxAge, now.Add(maxDelay))
		return ended(res), err
	}
	if t.Quota != nil {
		return d.takeQuota(ctx, j, t, bound, maxAge, first)
	}
	tokens := d.slotTokens(t.Route, j)
	n := min(tokens+d.pendingLocal(t.Route), max(t.Bucket.Limit.Capacity(), tokens))
	inTurn := false // j asks at its turn of the fleet (askers.go)
	if t.OneAsker && t.Sharded == nil {
		if inTurn = !j.AskAt.IsZero() || t.askedAgain; !inTurn {
			j, inTurn = d.bookTurn(ctx, j, t, 0)
		}
		if inTurn && !t.askedAgain {
			var (
				res  Result
				done bool
				err  error
			)
			if j, res, done, err = d.awaitTurn(ctx, j, t, first); done {
				return ended(res), err
			}
		}
		j.AskAt = time.Time{} // spent by this ask
	}
	leased := first.holds()
	slot, key, stamp, err := d.reserveRoute(ctx, t.Route, n, maxDelay, leased)
	d.storeFailing.Store(errors.Is(err, limiter.ErrUnavailable))
	for try := 0; try < contendedRetries && errors.Is(err, limiter.ErrContended); try++ {
		if err := d.sleep(ctx, time.Duration(rand.Int64N(int64(20*time.Millisecond)))); err != nil {
			return ended(Result{}), err
		}
		slot, key, stamp, err = d.reserveRoute(ctx, t.Route, n, maxDelay, leased)
	}
	if err == nil {
		t.askedAgain = false
		d.drainLocal(t.Route, now)
		// How far ahead of its answer the slot lies: a slot booked at a
		// later now and answered just before it is a slot due at once,
		// and one within SilenceAfter of the answer needs no silence read
		// (the race every grant due at once runs).
		return booking{hold: taking(newHold(slot, key, tokens, stamp, slot.Sub(latest(now, d.now()))))}, nil
	}
	if t.Shadow && !errors.Is(err, limiter.ErrInvalidArgument) && ctx.Err() == nil {
		return d.shadowRefused(j, t.Route, err, bound != noBound, now), nil
	}
	r := refusal{Err: err, Bound: bound, Deadline: j.Deadline, MaxAge: maxAge, End: now.Add(maxDelay),
		LocalShare: t.LocalShare && d.LocalShare != nil && d.Can.KnownSilence != nil, Cooldown: d.Policy.StoreCooldown, CtxErr: ctx.Err(),
		Horizon: t.Horizon > 0, Now: d.now(), Sleep: d.sleepBound(ctx, t)}
	if r.horizonDenial() && !t.OneAsker {
		r.Spread = d.spread(t.Route) // a lone asker has no one to spread from
	}
	if wait, _ := limiter.RetryAfter(err); inTurn && r.horizonDenial() {
		if T := time.Duration(t.Bucket.Limit.Interval()) * time.Microsecond; wait < T && !t.askedAgain && d.canSleep(ctx, t, wait) {
			// A live push booked off the turns' beat: its token ends
			// before the next turn, which would leave the rest of an
			// interval unused.
			t.askedAgain = true
			if err := d.sleepForToken(ctx, wait, first); err != nil {
				return ended(Result{}), err
			}
			return d.reserve(ctx, j, t, d.now(), first)
		}
		// A live push took the turn's token: the next turn from the token
		// the denial names.
		t.askedAgain = false
		if j, ok := d.bookTurn(ctx, j, t, wait); ok {
			return d.reserve(ctx, j, t, d.now(), first)
		}
	}
	dec, ok := decideRefusal(r)
	switch {
	case !ok:
		return ended(Result{}), ctx.Err()
	case dec.Act == actSleep:
		if err := d.sleepForToken(ctx, dec.Wait, first); err != nil {
			return ended(Result{}), err
		}
		return d.reserve(ctx, j, t, d.now(), first)
	case dec.Act == actLocalShare:
		return d.localShare(ctx, j, t, now, err)
	case dec.StoreError:
		d.log().Warn("limiter store unavailable; deferring (fail closed)", "job_id", j.ID, "bucket", t.Bucket.Key, "err", err)
	}
	res, derr := d.act(ctx, j, t, dec)
	res.StoreError = res.StoreError || dec.StoreError
	return ended(res), derr
}

// booking is what a reservation came to: the hold it booked or, with done,
// the job disposed of otherwise (deferred, shed, expired), res saying how.
// res also carries what a booking records of a job it lets through (a
// shadow route's would-be deferral, a local share's push).
type booking struct {
	hold holding
	res  Result
	done bool
}

// ended is a booking that disposed of its job as res says.
func ended(res Result) booking { return booking{res: res, done: true} }

// unbookable ends j, which has no slot before its bound (its deadline, or
// its max age that ends at end): shed or expired, with no token spent.
func (d *Dispatcher) unbookable(ctx context.Context, j job.Job, t *task, bound int, maxAge time.Duration, end time.Time) (Result, error) {
	return d.act(ctx, j, t, unbookable(bound, j.Deadline, maxAge, end))
}

// What bounds a reservation below MaxReserve: the job's deadline (past it
// the job is shed) or its max age (past it the job expires).
const (
	noBound = iota
	deadlineBound
	maxAgeBound
)

// shadowRefused lets a Shadow route's job through when the reservation
// failed, recording what enforcement would have done: shed it (no slot
// before its deadline), defer it (no slot within MaxReserve, contention,
// or the store unreachable).
func (d *Dispatcher) shadowRefused(j job.Job, route Route, err error, bounded bool, now time.Time) booking {
	res := Result{ShadowWouldDefer: true}
	if wait, denied := limiter.RetryAfter(err); denied {
		res.ShadowWait = wait
		if bounded {
			res.ShadowWouldDefer, res.ShadowWouldShed = false, true
		}
	} else if !errors.Is(err, limiter.ErrContended) {
		res.StoreError = true
		d.log().Warn("limiter store unavailable; shadow route pushes anyway", "job_id", j.ID, "bucket", route.Bucket.Key, "err", err)
	}
	// No slot is held: the push goes out now, as the integration did
	// before fleetbucket.
	return booking{hold: taking(job.Hold{At: now, Key: firstShard(route)}), res: res}
}

// reserveRoute books n tokens of every bucket of the route (of one shard,
// for a sharded route, whose key it returns), and the stamp of a slot an
// adaptive bucket granted (see limiter.Reservation.Stamp). leased: the
// push holds the in-flight lease it took before its token (reserveAhead).
func (d *Dispatcher) reserveRoute(ctx context.Context, route Route, n int, maxDelay time.Duration, leased bool) (time.Time, string, *limiter.Stamp, error) {
	switch {
	case route.Sharded != nil:
		sharder := d.Can.Shards
		if sharder == nil {
			return time.Time{}, "", nil, &limiter.ArgumentError{Field: "route.sharded", Reason: fmt.Sprintf("the limiter (%T) cannot reserve in shards", d.Limiter)}
		}
		r, err := sharder(ctx, *route.Sharded, n, maxDelay)
		return r.Slot, r.Key, nil, err
	case len(route.Also) == 0:
		r, err := d.reserveAhead(ctx, route.Bucket, n, maxDelay, leased)
		return r.Slot, "", granted(r.Stamp()), err
	}
	multi := d.Can.Multi
	if multi == nil {
		return time.Time{}, "", nil, &limiter.ArgumentError{Field: "route.also", Reason: fmt.Sprintf("the limiter (%T) cannot reserve several buckets at once", d.Limiter)}
	}
	r, err := multi(ctx, route.buckets(), n, maxDelay)
	return r.Slot, "", nil, err
}

// firstShard is the key a push of a sharded route draws from when it holds
// no slot of the shared bucket (shadow and local-share pushes).
func firstShard(route Route) string {
	if route.Sharded == nil {
		return ""
	}
	shards, err := route.Sharded.Buckets()
	if err != nil {
		return "" // pushBuckets reports it
	}
	return shards[0].Key
}

// reserveAhead reserves n tokens of b within maxDelay, its write claiming
// a now as far ahead as grants have taken to be answered (Can.Ahead), so
// that the grant is answered before its slot as long as the store is no
// slower than it was: the push then leaves at the slot. It learns how
// long this grant took. A limiter that cannot book ahead reserves as is.
//
// A push under the lease it took first (leased) spends its token at once
// (lease.go): its write claims the clock's now. Booked ahead, the slot
// would idle the lease until it came, and one further off than its grace
// (the slowest recent grant and a quarter, past this one's answer) hands
// the lease back (decideSlot's FreeLease) into a set known contended: the
// push waits for a lease again, past its slot's grace, and books a second
// token as it leaves.
func (d *Dispatcher) reserveAhead(ctx context.Context, b limiter.Bucket, n int, maxDelay time.Duration, leased bool) (limiter.Reservation, error) {
	a := d.Can.Ahead
	if a == nil {
		return d.Limiter.Reserve(ctx, b, n, maxDelay)
	}
	ahead := min(d.granting.lead(d.Policy.MaxHold, b.Limit.Margin), maxDelay)
	if leased {
		ahead = 0
	}
	start := d.now()
	r, err := a(ctx, b, n, maxDelay, ahead)
	if err == nil {
		d.granting.observe(d.now().Sub(start))
	}
	return r, err
}

// AheadReserver books a slot with its write claiming a now ahead of the
// clock (*limiter.Limiter's ReserveAhead).
type AheadReserver func(ctx context.Context, b limiter.Bucket, n int, maxDelay, ahead time.Duration) (limiter.Reservation, error)
