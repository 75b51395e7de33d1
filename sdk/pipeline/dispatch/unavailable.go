package dispatch

import (
	"context"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// RouteUnavailableError is a resolver's answer for a job whose route it
// cannot complete now but will later: its credential's token cannot be
// read (Secrets Manager unreachable, throttled or slow). That is a store
// failure, not a job that can never be pushed: the job is deferred for
// StoreCooldown, holding its work (Work.Hold), as when the limiter store
// is down, and never dead-lettered as unroutable, which would give its
// work up. Route is the route resolved but for what is unavailable, so
// that the job's lifetime bounds (MaxAge, MaxDeferrals) still apply.
type RouteUnavailableError struct {
	Route Route
	Err   error
}

func (e *RouteUnavailableError) Error() string { return "route unavailable for now: " + e.Err.Error() }

func (e *RouteUnavailableError) Unwrap() error { return e.Err }

// routeUnavailable defers j until its route can be completed. A slot it
// holds is given up: it would pass while the job waits.
func (d *Dispatcher) routeUnavailable(ctx context.Context, j job.Job, t *task, e *RouteUnavailableError) (Result, error) {
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	d.log().Warn("the job's route is unavailable for now; deferring (fail closed)", "job_id", j.ID, "err", e.Err)
	wasted := 0
	if j.Hold.Held() {
		wasted = 1
	}
	res, err := d.deferUnheld(ctx, j, t, d.Policy.StoreCooldown, e.Error())
	res.Bucket, res.StoreError, res.WastedSlots = e.Route.Bucket.Key, true, res.WastedSlots+wasted
	return res, err
}
