package dispatch

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
)

// pushFailed handles a push that failed: decideFailure says what becomes
// of the job, and pushFailed does it. Whatever it says, the job's hold is
// gone: spent on the push, or lost with its retries. ctx is the call's,
// not the push's under its lease, which may have ended with the push.
func (d *Dispatcher) pushFailed(ctx context.Context, j job.Job, t *task, p Payload, res Result, err error) (Result, *job.Job, error) {
	f := failure{Err: err, Failures: j.Failures, Policy: d.Policy, CallEnded: ctx.Err() != nil}
	if f.mayRefresh() {
		f.Refreshed = t.refresh != nil && t.refresh()
	}
	dec, ok := decideFailure(f)
	if !ok {
		return Result{}, nil, err
	}
	if dec.CountFailure {
		j.Failures++
	}
	if dec.Pause {
		d.pause(ctx, t.Route, d.now().Add(dec.Wait))
	}
	dec.Hold = dropped // spent, or refused: the job books another when back
	out, err := d.act(ctx, j, t, dec)
	out.Attempts, out.Throttled, out.Isolation = res.Attempts, res.Throttled, res.Isolation
	out.StoreError = out.StoreError || dec.StoreError
	out.CredentialRefused, out.HotelRefused = dec.CredentialRefused, dec.HotelRefused
	if dec.ReportSlot {
		out.Slot = res.Slot
	}
	return out, nil, err
}

// failureWait is how long a job that failed k times in a row waits:
// FailureBackoff·2^(k−1), at least what the vendor asked for and a second,
// at most SQS's 15 minutes.
func failureWait(p Policy, k int, asked time.Duration) time.Duration {
	backoff := p.FailureBackoff << min(k-1, 20)
	return min(max(asked, time.Second, backoff), queue.MaxDelay)
}

// Penalizer empties a bucket for the whole fleet until a time
// (*limiter.Limiter's Penalize); the dispatcher pauses a route whose
// credential the vendor refuses with it, where its Limiter has it.
type Penalizer func(ctx context.Context, b limiter.Bucket, until time.Time) error

// pause stops every worker's grants on route's bucket (every shard of a
// sharded one) until `until`.
func (d *Dispatcher) pause(ctx context.Context, route Route, until time.Time) {
	p := d.Can.Penalize
	if p == nil {
		return // only this job waits
	}
	buckets := []limiter.Bucket{route.Bucket}
	if route.Sharded != nil {
		if shards, err := route.Sharded.Buckets(); err == nil {
			buckets = shards
		}
	}
	for _, b := range buckets {
		if err := p(ctx, b, until); err != nil {
			d.log().Warn("could not pause a bucket whose credential the vendor refuses; other workers find out with their own push", "bucket", b.Key, "err", err)
		}
	}
}
