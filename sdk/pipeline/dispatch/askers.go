package dispatch

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A route that takes only tokens free at once (Route.OneAsker: a resync's
// bulk pushes, Horizon ≈ 0) is denied until its bucket's tat has come, and
// N jobs waiting on one bucket would each ask at every free token: N
// conditional writes for one grant. Asking in turn within a process left
// one asker per execution environment, and the deferred queue spreads a
// bucket's bulk jobs over every environment (in the simulated onboarding
// all 8 asked each bucket each second, and 13 in 16 failed limiter writes
// came within 10 ms of another environment's grant: 5.2 failed writes a
// bulk push at 10 hotels a bucket, 11 at 30). So a job asks at a turn of
// the whole fleet: it books a slot in the bucket's ask queue (askBucket: a
// bucket of its own at the route's rate, burst 1), which hands out turns
// one interval apart, and asks the bucket at its turn. Booking a turn in a
// busy queue is one write that does not fail (it adds an interval to the
// queue's tat); the ask at the turn finds the token free unless a live
// push took it, and its denial names the next free token, from which the
// job books its next turn. A turn no job takes up (its job died, its lane
// went live) costs at most one interval: the next turn's job asks then and
// finds the token kept (a burst of 1 keeps one).

// askSuffix ends the key of a bucket's ask queue: bucket keys are
// channel#credential#endpoint (or #meter), so no bucket's key is another's
// ask queue's.
const askSuffix = "#asks"

// askBucket is b's ask queue: turns one interval of b apart.
func askBucket(b limiter.Bucket) limiter.Bucket {
	return limiter.Bucket{Key: b.Key + askSuffix, Limit: limiter.Limit{Rate: b.Limit.Rate, Burst: 1}}
}

// bookTurn is j carrying its turn to ask t's bucket (job.Job.AskAt), no
// earlier than after from now (a denial's Retry-After: the next free
// token), nor before the booking's answer: an ask later than its turn
// takes a token the next turn's job then finds gone. ok is false when the
// queue gave no turn (its store failing, booked past MaxReserve): j then
// asks as it is.
func (d *Dispatcher) bookTurn(ctx context.Context, j job.Job, t *task, after time.Duration) (job.Job, bool) {
	b, maxDelay := askBucket(t.Bucket), d.Policy.MaxReserve
	// Before a process has seen its store answer, a tenth of an interval
	// (the bucket's margin, if longer).
	T := time.Duration(t.Bucket.Limit.Interval()) * time.Microsecond
	after = max(after, d.granting.lead(d.Policy.MaxHold, max(t.Bucket.Limit.Margin, T/10)))
	var (
		r   limiter.Reservation
		err error
	)
	start := d.now()
	if a := d.Can.Ahead; a != nil {
		r, err = a(ctx, b, 1, maxDelay, min(after, maxDelay))
	} else {
		r, err = d.Limiter.Reserve(ctx, b, 1, maxDelay)
	}
	if err == nil {
		d.granting.observe(d.now().Sub(start))
	}
	if err != nil {
		d.log().Info("no turn from the bucket's ask queue; asking as it comes", "job_id", j.ID, "bucket", t.Bucket.Key, "err", err)
		return j, false
	}
	j.AskAt = latest(r.Slot, start.Add(after))
	return j, true
}

// awaitTurn waits, within the call's hold, for j's turn (j.AskAt), and
// returns j to ask at it. A turn missed by an interval or more (j came
// back late from the queue) is the next turn's token: j books another
// rather than ask for a token taken. done: j was deferred instead (res
// says so), to come back early enough to sleep the rest of the wait in
// the call that takes it.
func (d *Dispatcher) awaitTurn(ctx context.Context, j job.Job, t *task, first *firstLease) (_ job.Job, res Result, done bool, err error) {
	T := time.Duration(t.Bucket.Limit.Interval()) * time.Microsecond
	if d.now().Sub(j.AskAt) >= T {
		if j, ok := d.bookTurn(ctx, j, t, 0); ok {
			return d.awaitTurn(ctx, j, t, first)
		}
		return j, Result{}, false, nil
	}
	wait := j.AskAt.Sub(d.now())
	switch {
	case wait <= 0:
		return j, Result{}, false, nil
	case d.canSleep(ctx, t, wait):
		if err := d.sleepForToken(ctx, wait, first); err != nil {
			return j, Result{}, true, err
		}
		return j, Result{}, false, nil
	}
	res, err = d.deferJob(ctx, j, t, turnDeferral(wait, d.Policy.MaxHold), "waiting for its turn to ask its bucket")
	return j, res, true, err
}

// turnDeferral is how long to defer a job whose turn is wait away, so
// that it is back before its turn with no more to sleep than a deferred
// call holds (hold): at once if that call can sleep the whole wait; by
// whole seconds (SQS rounds its delay up) leaving half a hold to sleep
// otherwise. A wait under a second that a deferred call cannot sleep goes
// as it is (sentBack): back after a second, past its turn, it books
// another.
func turnDeferral(wait, hold time.Duration) time.Duration {
	switch {
	case wait <= hold:
		return 0
	case wait < time.Second:
		return wait
	}
	return (wait - hold/2).Truncate(time.Second)
}
