package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// Calendar quotas (Route.Quota, connections' "quota").
//
// A route with a quota takes its push's token and one unit of the quota
// together, now (limiter.TakeWithQuota: one transaction with the route's
// rate limits; all are charged or none), rather than booking a slot ahead:
// a slot booked for later would hold quota the vendor has not counted yet,
// and a quota spent by then would leave the slot unusable.
//
// A denial by the rate limits is a token wait, as for any route: slept
// within the call's hold, deferred past it. A denial by the quota is the
// period's reset plus the job's own offset in the first minute after it
// (gcra.Spread of the job's id): the fleet's deferred jobs come back over
// that minute, not all in its first second, and a redelivered job comes
// back at the same moment as the first. No token or quota is spent by a
// denied job.

// A slot booked without the quota (a batch's due jobs and lingering jobs
// book theirs with one write, ReserveBatch) takes its unit as its request
// leaves (heldQuota), and so does a later message of a push that spends
// tokens its slot held: every request the vendor counts takes one unit,
// and one only, whichever way its token was booked. The unit is taken at
// the request, not at the booking, for the reason above. A quota spent by
// then leaves the slot unused and defers the job as a denial would.

// QuotaTaker takes a calendar quota with tokens, in one transaction
// (*limiter.Limiter's TakeWithQuota); QuotaAloneTaker takes it alone, for
// a slot held already (TakeQuota). The dispatcher needs both for routes
// with a Quota.
type (
	QuotaTaker      func(ctx context.Context, buckets []limiter.Bucket, q limiter.QuotaBucket, n int, id string) (limiter.MultiReservation, error)
	QuotaAloneTaker func(ctx context.Context, q limiter.QuotaBucket, n int, id string) (limiter.QuotaGrant, error)
)

// takeQuota takes route's token and quota for j now, or disposes of j
// (done): deferred to the next token or the quota's reset, shed or
// expired when that is past its deadline or max age. bound is reserve's
// (a shadow route records it).
func (d *Dispatcher) takeQuota(ctx context.Context, j job.Job, t *task, bound int, maxAge time.Duration, first *firstLease) (booking, error) {
	taker := d.Can.Quota
	if taker == nil {
		res, err := d.deadLetter(ctx, j, t, DeadLettered, fmt.Sprintf("route has a quota, but the limiter (%T) cannot take one", d.Limiter))
		return ended(res), err
	}
	for try := 0; ; try++ {
		r, err := taker(ctx, t.buckets(), *t.Quota, 1, j.ID)
		if err == nil {
			// The slot is the now the transaction's write claimed, not
			// its answer: the store's latency between them is lateness,
			// which the grace counts as the request leaves (spendable). A
			// taker that names no slot (a fake) is taken at its word.
			at := r.Slot
			if at.IsZero() {
				at = d.now()
			}
			return booking{hold: taking(job.Hold{At: at, Tokens: 1, Quota: true})}, nil
		}
		if ctx.Err() != nil {
			return ended(Result{}), ctx.Err()
		}
		if t.Shadow && !errors.Is(err, limiter.ErrInvalidArgument) {
			return d.shadowRefused(j, t.Route, err, bound != noBound, d.now()), nil
		}
		if errors.Is(err, limiter.ErrContended) && try < contendedRetries {
			if err := d.sleep(ctx, time.Duration(rand.Int64N(int64(20*time.Millisecond)))); err != nil {
				return ended(Result{}), err
			}
			continue
		}
		dec := decideQuota(d.quotaRefusal(ctx, j, t, maxAge, err, false))
		if dec.Act == actSleep {
			if err := d.sleepForToken(ctx, dec.Wait, first); err != nil {
				return ended(Result{}), err
			}
			continue
		}
		res, err := d.quotaRefused(ctx, j, t, dec, err)
		return ended(res), err
	}
}

// quotaRefusal is what decideQuota reads of j's refused take of its
// route's quota; held: its slot was booked already (heldQuota).
func (d *Dispatcher) quotaRefusal(ctx context.Context, j job.Job, t *task, maxAge time.Duration, err error, held bool) quotaRefusal {
	return quotaRefusal{Err: err, Spent: quotaSpent(err, t.Route), Quota: *t.Quota, Held: held, Now: d.now(), Sleep: d.sleepBound(ctx, t),
		Deadline: j.Deadline, FirstSeen: j.FirstSeen, MaxAge: maxAge, Cooldown: d.Policy.StoreCooldown}
}

// quotaRefused carries out dec, decideQuota's end for j, whose take of its
// route's quota was refused by err.
func (d *Dispatcher) quotaRefused(ctx context.Context, j job.Job, t *task, dec decision, err error) (Result, error) {
	if dec.StoreError {
		d.log().Warn("limiter store unavailable; deferring (fail closed)", "job_id", j.ID, "bucket", t.Bucket.Key, "err", err)
	}
	res, derr := d.act(ctx, j, t, dec)
	res.StoreError = res.StoreError || dec.StoreError
	return res, derr
}

// heldQuota takes the unit of route's quota that req, a request sent on
// tokens held already, needs when they were booked without it (paid is
// false): one take of the quota alone, retried a few times when
// contended. A nil error lets the request go.
func (d *Dispatcher) heldQuota(ctx context.Context, req otapush.Request, route Route, paid bool) error {
	if !req.Reserved || route.Quota == nil || paid {
		return nil
	}
	taker := d.Can.QuotaAlone
	if taker == nil {
		return &limiter.ArgumentError{Field: "route.quota", Reason: fmt.Sprintf("the limiter (%T) cannot take a quota", d.Limiter)}
	}
	for try := 0; ; try++ {
		_, err := taker(ctx, *route.Quota, 1, req.JobID)
		if !errors.Is(err, limiter.ErrContended) || try >= contendedRetries || ctx.Err() != nil {
			return err
		}
		if err := d.sleep(ctx, time.Duration(rand.Int64N(int64(20*time.Millisecond)))); err != nil {
			return err
		}
	}
}

// slotQuotaRefused ends a push whose held slot could not take its unit
// of the quota (heldQuota's err): the slot goes unused, and j is disposed
// of as a refused take is. A shadow route pushes anyway, recording what
// enforcement would have done (ok).
func (d *Dispatcher) slotQuotaRefused(ctx context.Context, j job.Job, t *task, res Result, err error) (_ Result, ok bool, _ error) {
	if ctx.Err() != nil {
		return Result{}, false, ctx.Err()
	}
	if t.Shadow && !errors.Is(err, limiter.ErrInvalidArgument) {
		wait, _ := limiter.RetryAfter(err)
		res.ShadowWouldDefer, res.ShadowWait = true, max(res.ShadowWait, wait)
		return res, true, nil
	}
	maxAge, _ := d.lifetime(t.Route)
	dec := decideQuota(d.quotaRefusal(ctx, j, t, maxAge, err, true))
	dec.Hold = dropped // the slot goes unused
	out, err := d.quotaRefused(ctx, j, t, dec, err)
	out.WastedSlots += res.WastedSlots + 1
	return out, false, err
}

// quotaSpent reports whether err is route's quota refusing (rather than
// one of its rate limits).
func quotaSpent(err error, route Route) bool {
	var ex *limiter.ExhaustedError
	return errors.As(err, &ex) && ex.Key == limiter.QuotaKey(route.Quota.Key)
}
