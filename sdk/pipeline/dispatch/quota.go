package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
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

// QuotaTaker is the part of *limiter.Limiter that takes tokens and a
// quota in one transaction; the dispatcher needs it for routes with a
// Quota.
type QuotaTaker interface {
	TakeWithQuota(ctx context.Context, buckets []limiter.Bucket, q limiter.QuotaBucket, n int, id string) (limiter.MultiReservation, error)
}

// takeQuota takes route's token and quota for j now, or disposes of j
// (done): deferred to the next token or the quota's reset, shed or
// expired when that is past its deadline or max age. bound is reserve's
// (a shadow route records it).
func (d *Dispatcher) takeQuota(ctx context.Context, j *job.Job, route Route, bound int, maxAge time.Duration, first *firstLease) (Result, bool, error) {
	taker := d.Can.Quota
	if taker == nil {
		res, err := d.deadLetter(ctx, *j, DeadLettered, fmt.Sprintf("route has a quota, but the limiter (%T) cannot take one", d.Limiter))
		return res, true, err
	}
	for try := 0; ; try++ {
		_, err := taker.TakeWithQuota(ctx, route.buckets(), *route.Quota, 1, j.ID)
		if err == nil {
			j.Hold = job.Hold{At: d.now(), Tokens: 1}
			return Result{}, false, nil
		}
		if ctx.Err() != nil {
			return Result{}, true, ctx.Err()
		}
		if route.Shadow && !errors.Is(err, limiter.ErrInvalidArgument) {
			return d.shadowRefused(j, route, err, bound != noBound, d.now())
		}
		wait, denied := limiter.RetryAfter(err)
		back := d.now().Add(wait)
		switch {
		case denied && !j.Deadline.IsZero() && !back.Before(j.Deadline):
			// A reset hours away would bring the job back past its
			// deadline (beyond MaxReserve, which bounds only slots).
			res, err := d.unbookable(ctx, *j, deadlineBound, maxAge, j.Deadline)
			return res, true, err
		case denied && !back.Before(j.FirstSeen.Add(maxAge)):
			res, err := d.unbookable(ctx, *j, maxAgeBound, maxAge, j.FirstSeen.Add(maxAge))
			return res, true, err
		case denied && !quotaSpent(err, route) && d.canSleep(ctx, wait):
			// The next token is near: wait for it here, as for a slot.
			if err := d.sleepForToken(ctx, wait, first); err != nil {
				return Result{}, true, err
			}
			continue
		case denied:
			reason := "no token of the quota route's limits now"
			if quotaSpent(err, route) {
				reason = fmt.Sprintf("quota of %d per %s spent: back after its reset, spread over the minute after it", route.Quota.Quota.Count, route.Quota.Quota.Period)
			}
			res, err := d.deferJob(ctx, *j, route, wait, reason)
			return res, true, err
		case errors.Is(err, limiter.ErrContended) && try < contendedRetries:
			if err := d.sleep(ctx, time.Duration(rand.Int64N(int64(20*time.Millisecond)))); err != nil {
				return Result{}, true, err
			}
			continue
		case errors.Is(err, limiter.ErrContended):
			res, err := d.deferJob(ctx, *j, route, 0, "bucket contended; retrying")
			return res, true, err
		case errors.Is(err, limiter.ErrInvalidArgument):
			res, err := d.deadLetter(ctx, *j, DeadLettered, "route has an invalid limit or quota: "+err.Error())
			return res, true, err
		}
		cooldown := d.Policy.StoreCooldown
		var open *breaker.OpenError
		if errors.As(err, &open) {
			cooldown = max(cooldown, open.RetryAfter)
		}
		d.log().Warn("limiter store unavailable; deferring (fail closed)", "job_id", j.ID, "bucket", route.Bucket.Key, "err", err)
		res, derr := d.deferJob(ctx, *j, route, cooldown, "limiter store unavailable")
		res.StoreError = true
		return res, true, derr
	}
}

// quotaSpent reports whether err is route's quota refusing (rather than
// one of its rate limits).
func quotaSpent(err error, route Route) bool {
	var ex *limiter.ExhaustedError
	return errors.As(err, &ex) && ex.Key == limiter.QuotaKey(route.Quota.Key)
}
