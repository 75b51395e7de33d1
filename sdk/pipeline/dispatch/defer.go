package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// deferJob sends j back to the deferred queue, to return after wait. t's
// work first extends its hold on what j carries to cover the wait; work
// that is no longer j's to push ends here instead.
func (d *Dispatcher) deferJob(ctx context.Context, j job.Job, t *task, wait time.Duration, reason string) (Result, error) {
	maxAge, maxDeferrals := d.lifetime(t.Route)
	switch back := d.now().Add(wait); {
	case j.Deferrals >= maxDeferrals:
		return d.deadLetter(ctx, j, t, Expired, fmt.Sprintf("expired: %d deferrals, max_deferrals %d (was to be deferred: %s)", j.Deferrals, maxDeferrals, reason))
	case !back.Before(j.FirstSeen.Add(maxAge)):
		// It would come back expired: end it now, rather than hold its
		// work (and, for a lane, keep new changes from waking it) until
		// then.
		return d.deadLetter(ctx, j, t, Expired, fmt.Sprintf("expired: would be back at %s, past its max_age %s from %s (was to be deferred: %s)",
			back.Format(time.RFC3339), maxAge, j.FirstSeen.Format(time.RFC3339), reason))
	}
	if t.work != nil {
		err := t.work.Hold(ctx, j, d.now().Add(wait))
		if errors.Is(err, ErrNothingToPush) {
			return Result{JobID: j.ID, Outcome: Coalesced, Reason: "not deferred: " + err.Error(), Slot: j.Hold.At}, nil
		}
		if err != nil {
			// The job still comes back; if its hold lapses meanwhile, the
			// work's next change takes it over and this job then finds
			// nothing to push.
			d.log().Warn("could not extend the job's hold before deferring it", "job_id", j.ID, "err", err)
		}
	}
	back, delay := sentBack(j, t.Route, d.now(), wait, d.Policy.MaxHold)
	if err := d.Queue.Defer(ctx, back, delay); err != nil {
		return Result{}, err
	}
	return Result{JobID: j.ID, Outcome: Deferred, Reason: reason, Wait: wait, Slot: j.Hold.At}, nil
}

// deferUnheld defers j as deferJob does, giving up the slot it holds: it
// would pass while the job waits, and the job books another when back.
func (d *Dispatcher) deferUnheld(ctx context.Context, j job.Job, t *task, wait time.Duration, reason string) (Result, error) {
	return d.act(ctx, j, t, decision{Act: actDefer, Wait: wait, Reason: reason, Hold: dropped})
}

// deadLetter sends j to the dead-letter queue with the reason. t's work
// gives up what j carries first (Work.Abandon), so that the next job to
// take the work up finds it pending, rather than waiting for j's hold to
// lapse. A job whose work is no longer its own (a duplicate
// delivery) ends there, as a duplicate does everywhere else.
func (d *Dispatcher) deadLetter(ctx context.Context, j job.Job, t *task, o Outcome, reason string) (Result, error) {
	storeErr := false
	if t.work != nil {
		err := t.work.Abandon(ctx, j, o)
		switch {
		case errors.Is(err, ErrNothingToPush):
			return Result{JobID: j.ID, Outcome: Coalesced, Reason: fmt.Sprintf("not %s (%s): %v", o, reason, err)}, nil
		case err != nil:
			// Dead-lettered all the same: the hold lapses by itself, and
			// the work's next change takes it over then.
			d.log().Warn("could not give up the dead-lettered job's work", "job_id", j.ID, "err", err)
			storeErr = true
		}
	}
	body, err := job.Encode(j)
	if err != nil {
		return Result{}, err
	}
	res, err := d.deadLetterBody(ctx, j.ID, body, o, reason)
	if j.Hold.Held() {
		res.WastedSlots = 1
	}
	res.StoreError = storeErr
	return res, err
}

func (d *Dispatcher) deadLetterBody(ctx context.Context, id, body string, o Outcome, reason string) (Result, error) {
	if err := d.Queue.DeadLetter(ctx, body, reason); err != nil {
		return Result{}, err
	}
	d.log().Warn("job dead-lettered", "job_id", id, "outcome", string(o), "reason", reason)
	return Result{JobID: id, Outcome: o, Reason: reason}, nil
}

// sentBack is j as the queue takes it to come back after wait, and the
// delay to send it with. A route that takes only tokens free at once
// (OneAsker: a resync's bulk pushes) loses a token it asks for late, since
// its burst of 1 keeps none, while an early ask costs one denied write;
// and SQS delays come in whole seconds, so a job deferred 100 ms for its
// next token came back after a second, in which its bucket's tokens went
// unused unless another job asked for them. Such a job's wait under a
// second goes with no delay: it is back at the queue's latency and sleeps
// the rest (j.NotBefore) where it lands, if a deferred call's hold (hold:
// Policy.MaxHold) can; otherwise it would go round the queue until then,
// each trip a deferral counted against max_deferrals.
func sentBack(j job.Job, r Route, now time.Time, wait, hold time.Duration) (job.Job, time.Duration) {
	if r.OneAsker && wait > 0 && wait < time.Second && wait <= hold {
		j.NotBefore = now.Add(wait)
		wait = 0
	}
	return j, wait
}
