package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// pushBuckets is what a push of j draws from: the route's bucket or, for a
// sharded route, the shard its slot came from, with the other shards as
// siblings a 429 empties too.
func pushBuckets(route Route, j job.Job) (limiter.Bucket, []limiter.Bucket, error) {
	if route.Sharded == nil {
		return route.Bucket, nil, nil
	}
	shards, err := route.Sharded.Buckets()
	if err != nil {
		return limiter.Bucket{}, nil, err
	}
	for i, b := range shards {
		if b.Key == j.Hold.Key {
			return b, append(append([]limiter.Bucket(nil), shards[:i]...), shards[i+1:]...), nil
		}
	}
	return limiter.Bucket{}, nil, fmt.Errorf("job %q holds a slot in %q, not a shard of %q (shards changed?)", j.ID, j.Hold.Key, route.Sharded.Key)
}

// push sends j at its slot, which it may reach before it: it sleeps the
// rest once the silence is asked (untilSlot). With Work, the body is what
// the work has pending, begun here (from silenceAsked) or ahead of the
// slot (prep, as serve began it), and after the vendor settles the push
// (accepted, or refused for good) the work may hand back the next job.
// leased is the in-flight lease j took before its token (actLeaseFirst),
// if it did: the push frees it once the answer is in, and serve on any
// way out before that.
func (d *Dispatcher) push(ctx context.Context, j job.Job, t *task, leased *heldLease, prep *Payload) (Result, *job.Job, error) {
	res := Result{JobID: j.ID, Slot: j.Hold.At}
	held := j.Hold.Held()
	var p Payload
	if prep != nil {
		p = *prep
	} else {
		if err := d.untilSlot(ctx, t, silenceAsked(j.Hold)); err != nil {
			return Result{}, nil, err
		}
		var err error
		if j, p, err = d.begin(ctx, j, t); err != nil {
			res, err := d.beginFailed(ctx, j, t, res, held, err)
			return res, nil, err
		}
	}
	res.JobID = j.ID // as the vendor sees it: Begin may have moved the job on
	bucket, siblings, err := pushBuckets(t.Route, j)
	if err != nil {
		return d.workFailed(ctx, j, t, res, err)
	}
	if t.ItemWeight > 0 {
		// The further items are booked from the slots free now, which must
		// not be before the slot they leave at.
		if err := d.untilSlot(ctx, t, j.Hold.At); err != nil {
			return Result{}, nil, err
		}
		var deferred *Result
		if p, deferred, err = d.charge(ctx, j, p, t, bucket); deferred != nil || err != nil {
			if deferred != nil {
				return *deferred, nil, err
			}
			return d.workFailed(ctx, j, t, res, err)
		}
	}
	out, ok, lres, err := d.lease(ctx, j, t, leased)
	if !ok {
		return lres, nil, err
	}
	defer out.release()
	if len(p.Messages) > 0 {
		return d.pushMessages(out, j, t, bucket, siblings, p, res)
	}
	ctx = out.ctx
	req := otapush.Request{
		Bucket: bucket, Also: t.Also, Siblings: siblings, URL: t.URL, Header: t.Header, JobID: j.ID, Body: p.Body, Reserved: true, Slot: j.Hold.At,
		Tokens: attemptTokens(t.Route, p), Reserve: t.Reserve, Horizon: t.Horizon,
		Stamp: stampOf(j.Hold), Quota: t.Quota, Lease: out.lease, Shadow: t.Shadow,
	}
	if res, ok, err := d.silentSlot(ctx, j, t, req, res); !ok {
		return res, nil, err
	}
	if err := d.untilSlot(ctx, t, req.Slot); err != nil {
		return Result{}, nil, err
	}
	req, late := d.spendable(t, req)
	if late {
		res.WastedSlots++
	}
	if err := d.heldQuota(ctx, req, t.Route, j.Hold.Quota); err != nil {
		var ok bool
		if res, ok, err = d.slotQuotaRefused(ctx, j, t, res, err); !ok {
			return res, nil, err
		}
	}
	if req, late = d.spendable(t, req); late {
		res.WastedSlots++
	}
	resp, concurrent, err := d.sendCounted(ctx, t, req)
	res.Attempts, res.Throttled = resp.Attempts, resp.Throttled
	if err != nil {
		out.release()
		if !concurrent {
			j = d.throttledItems(t.Route, j, p.Items, err)
		}
		return d.pushFailed(out.base, j, t, p, res, err)
	}
	d.acceptedItems(t.Route, p.Items)
	res.Outcome, res.Pushes, res.Items = Pushed, 1, p.Items
	return d.done(out, j, t, p, res)
}

// silenceAsked is when a push of h not begun ahead begins, so that its
// silence (silentSlot, after the begin and the lease) is asked as decide
// woke it for: limiter.SilenceAfter before a slot booked ahead, as
// limiter.Wait asks it, and at the slot otherwise. Begun at the slot, the
// read's latency delayed the send: on a loaded emulator a read of 45-76 ms
// spent a no-margin bucket's grace of one interval at 20/s, and the slot
// was booked again (TestDispatcherBooksABatchWithOneWrite: 2 writes for 1).
// Asked that much earlier, the read misses only a penalty written within
// SilenceAfter of the send: the race a slot granted less than SilenceAfter
// ahead runs unchecked.
func silenceAsked(h job.Hold) time.Time {
	if h.Ahead {
		return h.At.Add(-limiter.SilenceAfter)
	}
	return h.At
}

// untilSlot sleeps until slot, if it has not come: a push prepared ahead
// of its slot, and asked its silence, sends no earlier. A shadow route
// pushes at once.
func (d *Dispatcher) untilSlot(ctx context.Context, t *task, slot time.Time) error {
	if rest := slot.Sub(d.now()); rest > 0 && !t.Shadow {
		return d.sleep(ctx, rest)
	}
	return nil
}

// settle is a push under its in-flight lease, and how it steps out of it
// once the vendor has answered: what done needs.
type settle struct {
	ctx     context.Context // the push's: it ends at the lease's expiry
	base    context.Context // the push's context before the lease
	lease   *limiter.Lease  // nil: the route has no in-flight cap
	release func()          // frees the lease; safe to call twice
}

// silenceReason is why a job whose slot lies inside a vendor's silence
// was deferred.
const silenceReason = "its slot lies inside the silence a 429's Retry-After asked since it was booked; back at its end"
