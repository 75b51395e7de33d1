package dispatch

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// Confirmer checks that a slot an adaptive bucket granted still stands
// after what changed since (*limiter.Limiter's Confirm).
type Confirmer func(ctx context.Context, b limiter.Bucket, s limiter.Stamp) (bool, error)

// granted is a reservation's stamp as newHold takes it: nil unless an
// adaptive bucket granted the slot.
func granted(s limiter.Stamp, adaptive bool) *limiter.Stamp {
	if !adaptive {
		return nil
	}
	return &s
}

// newHold is the hold on a slot just granted at `at`, ahead by lead. Only
// a slot far enough ahead for a throttle to land before it carries its
// stamp (limiter.ConfirmAfter), and is confirmed at its slot: a slot
// pushed right after its grant costs no read, and a throttle on it is
// told apart by limiter.ThrottleHold instead. Such a slot is also checked
// for a silence (Ahead).
func newHold(at time.Time, key string, tokens int, s *limiter.Stamp, lead time.Duration) job.Hold {
	h := job.Hold{At: at, Key: key, Tokens: tokens, Ahead: lead >= limiter.SilenceAfter}
	if s != nil && lead >= limiter.ConfirmAfter {
		h.Grant = job.Grant{Version: s.Version, Interval: s.Interval}
	}
	return h
}

// Silencer tells whether a vendor asked a bucket for silence (a 429's
// Retry-After) that now lies inside (*limiter.Limiter's Silence).
type Silencer func(ctx context.Context, b limiter.Bucket) (time.Time, error)

// silenced is the end of a silence the vendor asked, since j's slot was
// booked, of the bucket it was booked in, if now lies inside it (zero
// otherwise). A penalty delays only the grants made after it, so a slot
// booked ahead (job.Hold.Ahead) is checked as its request leaves
// (silentSlot): free when this process heard from the bucket within
// limiter.SilenceAfter, one read otherwise. A slot booked just before its
// push is not checked.
func (d *Dispatcher) silenced(ctx context.Context, j job.Job, route Route) (time.Time, error) {
	s := d.Can.Silence
	if !j.Hold.Ahead || !j.Hold.Held() || s == nil {
		return time.Time{}, nil
	}
	b := route.Bucket
	if j.Hold.Key != "" {
		b.Key = j.Hold.Key // a shard: a 429 silences every shard
	}
	return s(ctx, b)
}

// stampOf is the stamp h's slot carries, nil for none.
func stampOf(h job.Hold) *limiter.Stamp {
	if h.Grant.Interval == 0 || !h.Held() {
		return nil
	}
	return &limiter.Stamp{Version: h.Grant.Version, Interval: h.Grant.Interval}
}

// revoked reports whether j's slot may not be spent: a change since its
// grant revoked it, or the store could not confirm it (fail closed; the
// error says which). It costs one read for a slot an adaptive bucket
// granted ConfirmAfter or more ahead (a deferred or batch-booked job), and
// none for any other (decide asks for it: decision.Confirm).
func (d *Dispatcher) revoked(ctx context.Context, j job.Job, route Route) (bool, error) {
	s := stampOf(j.Hold)
	if s == nil {
		return false, nil
	}
	c := d.Can.Confirm
	if c == nil {
		return false, nil // Validate refuses adaptive routes without Confirm
	}
	good, err := c(ctx, route.Bucket, *s)
	return !good, err
}
