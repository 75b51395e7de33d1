package dispatch

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// Confirmer is the part of *limiter.Limiter that checks that a slot an
// adaptive bucket granted still stands after what changed since.
type Confirmer interface {
	Confirm(ctx context.Context, b limiter.Bucket, s limiter.Stamp) (bool, error)
}

// stampOf is a slot's stamp as markStamp takes it: nil unless an adaptive
// bucket granted it.
func stampOf(s limiter.Stamp, adaptive bool) *limiter.Stamp {
	if !adaptive {
		return nil
	}
	return &s
}

// markStamp records on j the stamp of the slot it was just given, ahead
// by lead. Only a slot far enough ahead for a throttle to land before it
// carries one (limiter.ConfirmAfter), and is confirmed at its slot: a slot
// pushed right after its grant costs no read, and a throttle on it is
// told apart by limiter.ThrottleHold instead.
func markStamp(j *job.Job, s *limiter.Stamp, lead time.Duration) {
	j.GrantVersion, j.GrantInterval = 0, 0
	if s != nil && lead >= limiter.ConfirmAfter {
		j.GrantVersion, j.GrantInterval = s.Version, s.Interval
	}
}

// jobStamp is the stamp j's slot carries, nil for none.
func jobStamp(j job.Job) *limiter.Stamp {
	if j.GrantInterval == 0 || j.Slot.IsZero() {
		return nil
	}
	return &limiter.Stamp{Version: j.GrantVersion, Interval: j.GrantInterval}
}

// revoked reports whether j's slot may not be spent: a change since its
// grant revoked it, or the store could not confirm it (fail closed; the
// error says which). It costs one read for a slot an adaptive bucket
// granted ConfirmAfter or more ahead (a deferred or batch-booked job), and
// none for any other.
func (d *Dispatcher) revoked(ctx context.Context, j job.Job, route Route) (bool, error) {
	s := jobStamp(j)
	if s == nil {
		return false, nil
	}
	c, ok := d.Limiter.(Confirmer)
	if !ok {
		return false, nil
	}
	good, err := c.Confirm(ctx, route.Bucket, *s)
	return !good, err
}
