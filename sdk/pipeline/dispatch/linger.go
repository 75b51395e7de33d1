package dispatch

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// lingerSlot books a slot for a lingering job (j.Linger) within reach
// (lingerReach: its bucket would fill up before the linger ends): the hold,
// and whether it did.
//
// A lingering job collects work (the changes that ride in its push); the
// bucket meanwhile accrues tokens, up to its burst. Once it is full, every
// moment more that the job waits is quota lost while work is waiting. In
// GCRA terms the bucket is full from tat on, so the job asks for one token
// of the bucket taken with burst 1, booked at most until NotBefore:
// granted iff tat ≤ NotBefore, at slot max(tat, now), the moment the
// bucket fills. Jobs lingering on one bucket so queue at successive slots
// until NotBefore (Run books a batch's with one write), and the
// rest linger on. Denied, or the store failing, the job lingers as
// before: its reservation after the linger deals with errors. The slot is
// booked ahead by the store's latency, as a due job's is (reserveAhead):
// a bucket that is full already grants it at the now its write claims,
// and one claimed at the call's start is late by the whole answer.
func (d *Dispatcher) lingerSlot(ctx context.Context, route Route, reach time.Duration) holding {
	r, err := d.reserveAhead(ctx, burstOne(route.Bucket), 1, reach, false)
	if err != nil {
		return holding{}
	}
	// lingerReach leaves adaptive buckets out: no stamp.
	return taking(newHold(r.Slot, "", 1, nil, r.Slot.Sub(d.now())))
}

// lingerReach is how far ahead a lingering job may book a slot of route's
// bucket taken with burst 1 (lingerSlot): until its linger ends, its
// deadline or its max age, and at most (burst−1)·T plus the route's
// booking horizon, so that the grant leaves tat no further ahead than an
// ordinary reservation of the route may (tat ≤ now + burst·T + horizon;
// on a meter with an urgent reserve, its normal share) and its slot is no
// earlier than the route's own limit would give. ok is false for a job
// that does not linger and for routes with more than one bucket, shards,
// items, an adaptive limit, a local share or shadow mode: those linger
// as before.
func (d *Dispatcher) lingerReach(j job.Job, route Route, now time.Time) (time.Duration, bool) {
	if !j.Linger || j.NotBefore.IsZero() || j.Hold.Held() || route.Shadow || route.Sharded != nil || len(route.Also) > 0 ||
		route.ItemWeight > 0 || route.LocalShare || route.Bucket.Adaptive != nil {
		return 0, false
	}
	horizon := d.Policy.MaxReserve
	if route.Horizon > 0 {
		horizon = route.Horizon
	}
	lim := route.Bucket.Limit
	reach := min(j.NotBefore.Sub(now), time.Duration(int64(lim.Burst-1)*lim.Interval())*time.Microsecond+horizon)
	if !j.Deadline.IsZero() {
		reach = min(reach, j.Deadline.Sub(now))
	}
	if maxAge, _ := d.lifetime(route); j.FirstSeen.Add(maxAge).Sub(now) < reach {
		reach = j.FirstSeen.Add(maxAge).Sub(now)
	}
	return reach, reach > 0
}

// burstOne is b taken with a burst of one token: a reservation of it is
// granted iff tat ≤ now + maxDelay, at slot max(tat, now).
func burstOne(b limiter.Bucket) limiter.Bucket {
	b.Limit.Burst = 1
	return b
}

// spread is a random point of route's emission interval: how much later
// than its denial's wait a job denied by a horizon retries.
func (d *Dispatcher) spread(route Route) time.Duration {
	T := time.Duration(route.Bucket.Limit.Interval()) * time.Microsecond
	if d.Jitter != nil {
		return d.Jitter(T)
	}
	return time.Duration(rand.Int64N(int64(T) + 1))
}
