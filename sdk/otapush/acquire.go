package otapush

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// maxContendedJitter caps the pause before asking the limiter again after
// its writes all lost races (see acquire).
const maxContendedJitter = 50 * time.Millisecond

// MultiWaiter is the part of *limiter.Limiter that waits for a token of
// several buckets at once, for requests with Also.
type MultiWaiter interface {
	WaitMulti(ctx context.Context, buckets []limiter.Bucket, n int, maxWait time.Duration) (limiter.MultiReservation, error)
}

// QuotaTaker is the part of *limiter.Limiter that takes tokens and a
// calendar quota in one transaction, for requests with a Quota.
type QuotaTaker interface {
	TakeWithQuota(ctx context.Context, buckets []limiter.Bucket, q limiter.QuotaBucket, n int, id string) (limiter.MultiReservation, error)
}

// acquire waits for a token within what is left of the push's budget.
//
// A call that ends in limiter.ErrContended (every write lost a race to other
// workers: the bucket may well have tokens) is made again at once, after a
// jitter of up to one emission interval of the bucket (at most
// maxContendedJitter, at least 1ms) so that the losers do not collide again,
// for as long as the budget and ctx last. It is never turned into a
// deferral for the whole budget, which would starve this worker while the
// winners of the race take every token.
//
// A grant that reaches the push later than its bucket's margin allows
// (limiter.Late, checked here, as the request leaves, whatever the Limiter
// checked) is not sent on: it is left unspent and the push books again,
// and after limiter.MaxLateGrants such grants in a row it defers as for a
// store outage. Sent late, the request would reach the vendor's window
// beside the grants made since (docs/design.md, the margin).
func (c *Client) acquire(ctx context.Context, req Request, start time.Time) (*limiter.Reservation, error) {
	unspent := 0
	for {
		left := max(c.policy.MaxElapsed-c.now().Sub(start), 0)
		ahead := left
		if req.Horizon > 0 {
			ahead = min(left, req.Horizon)
		}
		slot, r, err := c.wait(ctx, req, ahead)
		if err == nil {
			late, b := c.late(req, slot)
			if late == 0 {
				return r, nil
			}
			if unspent++; unspent == limiter.MaxLateGrants {
				return nil, &DeferError{Cause: &limiter.LateGrantError{Key: b.Key, Grants: unspent, Slot: slot, Late: late, Margin: b.Limit.Margin}}
			}
			c.log.Info("the grant reached the push past its bucket's margin; booking again", "job_id", req.JobID, "bucket", b.Key, "slot", slot, "late", late)
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, limiter.ErrContended) {
			pause := c.contendedPause(req.Bucket)
			if c.now().Sub(start)+pause >= c.policy.MaxElapsed || pastDeadline(ctx, c.now().Add(pause)) {
				// The budget ran out in the race: come back soon, not after
				// a whole budget; nobody proved the bucket empty.
				return nil, &DeferError{After: pause, Cause: err}
			}
			if err := c.sleep(ctx, pause); err != nil {
				return nil, err
			}
			continue
		}
		wait, denied := limiter.RetryAfter(err)
		switch {
		case denied && (req.Horizon > 0 || req.Quota != nil):
			// The share is booked past the horizon: booking further
			// ahead would take the urgent reserve (or a quota's take is
			// now or never, its RetryAfter from now). Sleep until the next
			// token is near (Wait's RetryAfter counts from the end of its
			// max wait), plus a jitter so that retries denied together do
			// not all ask at once, and contend for it afresh.
			pause := wait + c.contendedPause(req.Bucket)
			if c.now().Sub(start)+pause >= c.policy.MaxElapsed || pastDeadline(ctx, c.now().Add(pause)) {
				return nil, &DeferError{After: pause, Cause: err}
			}
			if err := c.sleep(ctx, pause); err != nil {
				return nil, err
			}
			continue
		case denied:
			// A real exhaustion: the slot lies beyond the budget. Wait's
			// RetryAfter counts from the end of its max wait.
			return nil, &DeferError{After: wait + left, Cause: err}
		}
		// The store is down or unsure: fail closed, the job waits in the queue.
		return nil, &DeferError{Cause: err}
	}
}

// wait asks the limiter for what one attempt of req costs (Request.Tokens)
// in every bucket of req, at most left ahead, and returns the slot granted
// and the reservation of a single bucket.
func (c *Client) wait(ctx context.Context, req Request, left time.Duration) (time.Time, *limiter.Reservation, error) {
	n := max(req.Tokens, 1)
	if req.Quota != nil {
		taker, ok := c.limiter.(QuotaTaker)
		if !ok {
			return time.Time{}, nil, fmt.Errorf("the limiter (%T) cannot take a quota", c.limiter)
		}
		// A take is now or never: its RetryAfter counts from now, as the
		// horizon's branch of acquire reads it.
		r, err := taker.TakeWithQuota(ctx, append([]limiter.Bucket{req.Bucket}, req.Also...), *req.Quota, n, req.JobID)
		return r.Slot, nil, err
	}
	if len(req.Also) == 0 {
		r, err := c.limiter.Wait(ctx, req.Bucket, n, left)
		if err != nil {
			return time.Time{}, nil, err
		}
		return r.Slot, &r, nil
	}
	if multi, ok := c.limiter.(MultiWaiter); ok {
		r, err := multi.WaitMulti(ctx, append([]limiter.Bucket{req.Bucket}, req.Also...), n, left)
		return r.Slot, nil, err
	}
	return time.Time{}, nil, fmt.Errorf("the limiter (%T) cannot wait for several buckets at once", c.limiter)
}

// late is how much later than the margin of req's buckets allows a
// request on slot would leave now (limiter.Late; the tightest binds), and
// the bucket it is late for. A Limiter that names no slot (a fake) is
// taken at its word.
func (c *Client) late(req Request, slot time.Time) (time.Duration, limiter.Bucket) {
	if slot.IsZero() {
		return 0, req.Bucket
	}
	now := c.now()
	worst, which := limiter.Late(req.Bucket.Limit, slot, now), req.Bucket
	for _, b := range req.Also {
		if l := limiter.Late(b.Limit, slot, now); l > worst {
			worst, which = l, b
		}
	}
	return worst, which
}

// contendedPause is the jitter before asking again after contention: a draw
// in [0, min(T, maxContendedJitter)), at least 1ms, where T = 1/rate is the
// bucket's emission interval (a token a T from now is the next one to win).
func (c *Client) contendedPause(b limiter.Bucket) time.Duration {
	ceiling := maxContendedJitter
	if b.Limit.Rate > 0 {
		t := time.Duration(float64(time.Second) / b.Limit.Rate)
		ceiling = min(max(t, time.Millisecond), maxContendedJitter)
	}
	return max(c.jitter(ceiling), time.Millisecond)
}
