package dispatch

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// Confirmer is the part of *limiter.Limiter that checks a slot granted
// while an adaptive bucket probed above the rate that held.
type Confirmer interface {
	Confirm(ctx context.Context, b limiter.Bucket, p limiter.Probe) (bool, error)
}

// probeOf is a slot's probe as markProbe takes it: nil unless probing.
func probeOf(p limiter.Probe, probing bool) *limiter.Probe {
	if !probing {
		return nil
	}
	return &p
}

// markProbe records on j the probe of the slot it was just given, ahead
// by lead: only a slot far enough ahead for a throttle to land before it
// is confirmed (limiter.ConfirmAfter).
func markProbe(j *job.Job, p *limiter.Probe, lead time.Duration) {
	j.ProbeVersion, j.ProbeInterval = 0, 0
	if p != nil && lead >= limiter.ConfirmAfter {
		j.ProbeVersion, j.ProbeInterval = p.Version, p.Interval
	}
}

// revoked reports whether j's probing slot may not be spent: a throttle
// revoked it, or the store could not confirm it (fail closed; the error
// says which). A slot that is not probing costs no call.
func (d *Dispatcher) revoked(ctx context.Context, j job.Job, route Route) (bool, error) {
	if j.ProbeInterval == 0 || j.Slot.IsZero() {
		return false, nil
	}
	c, ok := d.Limiter.(Confirmer)
	if !ok {
		return false, nil
	}
	good, err := c.Confirm(ctx, route.Bucket, limiter.Probe{Version: j.ProbeVersion, Interval: j.ProbeInterval})
	return !good, err
}
