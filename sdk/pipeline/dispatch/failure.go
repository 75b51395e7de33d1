package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
)

func (d *Dispatcher) pushFailed(ctx context.Context, j job.Job, route Route, p Payload, res Result, err error) (Result, *job.Job, error) {
	var perm *otapush.PermanentError
	var later *otapush.DeferError
	switch {
	case errors.As(err, &perm) && credentialRefused(perm.Status) &&
		j.Failures < d.Policy.MaxFailures && d.refreshed(j):
		// The token was rotated: the same push goes out again with the new
		// one, counted as a failure so that a token that keeps changing
		// cannot loop.
		j.Failures++
		j.Hold = job.Hold{}
		def, err := d.deferJob(ctx, j, route, 0, "credential refreshed after "+perm.Error())
		def.Attempts, def.Throttled = res.Attempts, res.Throttled
		return def, nil, err
	case errors.As(err, &perm) && credentialRefused(perm.Status) && j.Failures < d.Policy.MaxFailures:
		// The vendor refuses the credential itself and no new token
		// replaced it (a rotation gone wrong, a revoked key): every push
		// on it would be refused too. Its bucket pauses for the whole
		// fleet until the job's backoff ends, and the job keeps its work
		// for then: nothing is cleared while an operator fixes the
		// credential, and the refusal pages (CredentialRefused).
		j.Failures++
		wait := d.failureWait(j, 0)
		d.pause(ctx, route, d.now().Add(wait))
		j.Hold = job.Hold{}
		def, err := d.deferJob(ctx, j, route, wait, "credential refused, its pushes paused: "+perm.Error())
		def.Attempts, def.Throttled, def.CredentialRefused = res.Attempts, res.Throttled, true
		return def, nil, err
	case errors.As(err, &perm):
		// Refused for good: the same push cannot succeed. The job goes to
		// the dead-letter queue with the reason. State-backed work is not
		// settled but given up (Abandoner): what the push carried stays
		// pending, to be pushed again by the work's next job, and the job
		// in the dead letter names its work, so that a redrive pushes it
		// again once the cause is fixed.
		reason := perm.Error()
		if credentialRefused(perm.Status) {
			reason = fmt.Sprintf("credential refused %d times in a row: %v", j.Failures+1, perm)
		}
		j.Hold = job.Hold{} // spent on the push, not wasted
		dl, err := d.deadLetter(ctx, j, DeadLettered, reason)
		dl.Attempts, dl.Throttled, dl.CredentialRefused = res.Attempts, res.Throttled, credentialRefused(perm.Status)
		return dl, nil, err
	case errors.As(err, &later) && errors.Is(later, limiter.ErrUnavailable):
		// The limiter's store, not the vendor, failed: fail closed, and
		// do not count it against the job.
		j.Hold = job.Hold{}
		def, err := d.deferJob(ctx, j, route, d.Policy.StoreCooldown, later.Error())
		def.Slot, def.Attempts, def.Throttled, def.StoreError = res.Slot, res.Attempts, res.Throttled, true
		return def, nil, err
	case errors.As(err, &later) && j.Failures+1 > d.Policy.MaxFailures:
		// Given up, as a refusal is (above): the job is dead-lettered and
		// its work stays pending.
		reason := fmt.Sprintf("gave up after %d failed pushes in a row: %v", j.Failures+1, later)
		j.Hold = job.Hold{}
		dl, err := d.deadLetter(ctx, j, DeadLettered, reason)
		dl.Attempts, dl.Throttled = res.Attempts, res.Throttled
		return dl, nil, err
	case errors.As(err, &later):
		j.Failures++
		wait := d.failureWait(j, later.After)
		j.Hold = job.Hold{} // retries spent or lost it; the next run acquires afresh
		def, err := d.deferJob(ctx, j, route, wait, later.Error())
		def.Slot, def.Attempts, def.Throttled = res.Slot, res.Attempts, res.Throttled
		return def, nil, err
	}
	return Result{}, nil, err
}

// credentialRefused says a vendor's status refuses the credential.
func credentialRefused(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// failureWait is how long a job that failed j.Failures times in a row
// waits: FailureBackoff·2^(k−1), at least what the vendor asked for and a
// second, at most SQS's 15 minutes.
func (d *Dispatcher) failureWait(j job.Job, asked time.Duration) time.Duration {
	backoff := d.Policy.FailureBackoff << min(j.Failures-1, 20)
	return min(max(asked, time.Second, backoff), queue.MaxDelay)
}

// Penalizer is the part of *limiter.Limiter that empties a bucket for the
// whole fleet until a time; the dispatcher pauses a route whose credential
// the vendor refuses with it, where its Limiter has it.
type Penalizer interface {
	Penalize(ctx context.Context, b limiter.Bucket, until time.Time) error
}

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
		if err := p.Penalize(ctx, b, until); err != nil {
			d.log().Warn("could not pause a bucket whose credential the vendor refuses; other workers find out with their own push", "bucket", b.Key, "err", err)
		}
	}
}

// refreshed asks the router to replace the job's credential token.
func (d *Dispatcher) refreshed(j job.Job) bool {
	return d.Can.Refresh != nil && d.Can.Refresh.RefreshCredential(j)
}
