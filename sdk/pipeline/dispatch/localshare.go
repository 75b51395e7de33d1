package dispatch

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// KnownSilencer is the end of the silence this process last learned a
// vendor asked of a bucket, if now lies inside it, with no store call
// (*limiter.Limiter's KnownSilence); zero for none.
type KnownSilencer func(b limiter.Bucket) time.Time

// localShare handles a LocalShare route's job while the limiter store is
// unreachable: a token of this process's share now, or soon enough to
// sleep for, lets it through with that time as its slot; otherwise it is
// deferred until the share has one (but not longer than StoreCooldown,
// when the store may be back). A silence this process knows the vendor
// asked of one of the route's buckets comes first: the share knows
// nothing of a 429's Retry-After, which the shared bucket enforced by its
// penalty, so the job waits for the silence's end (fail closed).
func (d *Dispatcher) localShare(ctx context.Context, j job.Job, t *task, now time.Time, storeErr error) (booking, error) {
	if until := d.knownSilence(t.Route, now); !until.IsZero() {
		d.log().Info("limiter store unavailable inside a vendor's silence; back at its end", "job_id", j.ID, "bucket", t.Bucket.Key, "until", until, "err", storeErr)
		res, err := d.deferJob(ctx, j, t, until.Sub(now), "limiter store unavailable, inside the silence a 429's Retry-After asked; back at its end")
		res.StoreError = true
		return ended(res), err
	}
	maxWait := d.Policy.BlockThreshold
	if !d.canSleep(ctx, t, maxWait) {
		maxWait = 0
	}
	// A push of items pays for each of them locally too; the tokens a
	// slot of the shared bucket held before the outage are gone with it.
	n := d.localTokens(t.Route, j)
	delay, ok := d.LocalShare.ReserveN(t.buckets(), n, now, maxWait)
	if ok {
		return booking{hold: taking(job.Hold{At: now.Add(delay), Key: firstShard(t.Route), Tokens: n}), res: Result{StoreError: true, LocalShares: 1}}, nil
	}
	wait := min(max(delay, time.Second), d.Policy.StoreCooldown)
	d.log().Info("limiter store unavailable and the local share is spent; deferring", "job_id", j.ID, "bucket", t.Bucket.Key, "wait", wait, "err", storeErr)
	res, err := d.deferJob(ctx, j, t, wait, "limiter store unavailable; local share spent")
	res.StoreError = true
	return ended(res), err
}

// knownSilence is the latest end, after now, of a silence this process
// knows of route's buckets (every shard of a sharded one, which a 429
// silences together), zero for none.
func (d *Dispatcher) knownSilence(route Route, now time.Time) time.Time {
	buckets := route.buckets()
	if route.Sharded != nil {
		if shards, err := route.Sharded.Buckets(); err == nil {
			buckets = append(buckets, shards...)
		}
	}
	var until time.Time
	for _, b := range buckets {
		if u := d.Can.KnownSilence(b); u.After(now) && u.After(until) {
			until = u
		}
	}
	return until
}

// localTokens is what a local-share push of j books: its slot's tokens
// (its items' on an endpoint metered by items), at most the smallest burst
// of the route's local shares; charge shrinks the push to what they pay
// for.
func (d *Dispatcher) localTokens(route Route, j job.Job) int {
	n := d.slotTokens(route, j)
	for _, b := range route.buckets() {
		_, burst := d.LocalShare.Share(b.Limit)
		n = min(n, burst)
	}
	return max(n, 1)
}

// pendingLocal is how many pushes this process made under its local share
// of route that the shared bucket has not booked: its first reservation
// after an outage books them with its own token, so that the bucket, full
// again, does not grant its burst on top of them. It is at most the
// smallest burst of the route's buckets (shards included) less one, the
// most one reservation can book.
func (d *Dispatcher) pendingLocal(route Route) int {
	if !route.LocalShare || d.LocalShare == nil {
		return 0
	}
	n := d.LocalShare.Pending(route.Bucket)
	bursts := route.buckets()
	if route.Sharded != nil {
		if shards, err := route.Sharded.Buckets(); err == nil {
			bursts = shards
		}
	}
	for _, b := range bursts {
		n = min(n, b.Limit.Capacity()-1)
	}
	return max(n, 0)
}

// drainLocal is called when the shared bucket granted route a slot that
// booked the local grants of an outage with it: the fleet spends the limit
// there again, and an outage starts this process's share from empty
// (fallback.Pacer.Drain).
func (d *Dispatcher) drainLocal(route Route, now time.Time) {
	if route.LocalShare && d.LocalShare != nil {
		d.LocalShare.Drain(route.buckets(), now)
	}
}
