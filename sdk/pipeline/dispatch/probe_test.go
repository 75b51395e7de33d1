package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// confirmer answers Confirm as scripted, on the rig's clock.
type confirmer struct {
	clock  clock
	good   bool
	err    error
	probes []limiter.Probe
	at     []time.Time // when each Confirm was asked
}

func (c *confirmer) Confirm(_ context.Context, _ limiter.Bucket, p limiter.Stamp) (bool, error) {
	c.probes = append(c.probes, p)
	c.at = append(c.at, c.clock.Now())
	return c.good, c.err
}

// A job whose slot an adaptive bucket granted ahead carries its stamp and
// is confirmed before it is pushed: a revoked slot (or one the store
// cannot confirm) is booked again, a good one is pushed; a slot with no
// stamp is never checked.
func TestProbingSlotIsConfirmedBeforeThePush(t *testing.T) {
	tests := []struct {
		name      string
		probe     limiter.Probe
		good      bool
		err       error
		confirms  int
		reserves  int
		pushedNow bool // pushed at the slot it held
	}{
		{"a slot with no stamp: no confirm", limiter.Probe{}, false, nil, 0, 0, true},
		{"a stamped slot that stands is pushed", limiter.Probe{Version: 3, Interval: 71_429}, true, nil, 1, 0, true},
		{"a revoked slot is booked again", limiter.Probe{Version: 3, Interval: 71_429}, false, nil, 1, 1, false},
		{"a slot the store cannot confirm is booked again (fail closed)", limiter.Probe{Version: 3, Interval: 71_429}, false, errors.New("store down"), 1, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			c := &confirmer{clock: r.clock, good: tt.good, err: tt.err}
			r.d.Can.Confirm, r.d.Work = c.Confirm, nil
			r.bookAhead(r.clock.Now().Add(2 * time.Minute)) // a new slot is later
			j := testJob(r.clock.Now())
			held := r.clock.Now()
			j.Payload, j.Deferrals, j.Hold.At = []byte(`{"n":1}`), 1, held
			j.Hold.Grant.Version, j.Hold.Grant.Interval = tt.probe.Version, tt.probe.Interval
			res, err := r.d.HandleJob(context.Background(), j)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.probes) != tt.confirms || len(r.bookings()) != tt.reserves {
				t.Fatalf("%d confirms and %d reservations, want %d and %d", len(c.probes), len(r.bookings()), tt.confirms, tt.reserves)
			}
			if revoked := tt.reserves; res.RevokedSlots != revoked {
				t.Fatalf("%d revoked slots counted, want %d", res.RevokedSlots, revoked)
			}
			if tt.confirms > 0 && c.probes[0] != tt.probe {
				t.Fatalf("confirmed %+v, want the job's probe %+v", c.probes[0], tt.probe)
			}
			pushedNow := res.Outcome == Pushed && res.Slot.Equal(held)
			if pushedNow != tt.pushedNow {
				t.Fatalf("outcome %s at slot %v (held %v); pushed at the held slot: %v, want %v", res.Outcome, res.Slot, held, pushedNow, tt.pushedNow)
			}
			// The push carries the slot's stamp, so that a throttle on it
			// tells the limiter which rate it was granted at.
			if pushedNow && tt.probe.Interval != 0 && (len(r.push.stamps) != 1 || r.push.stamps[0] == nil || *r.push.stamps[0] != tt.probe) {
				t.Fatalf("pushed with stamps %v, want the job's %+v", r.push.stamps, tt.probe)
			}
		})
	}
}

// A stamped slot is confirmed ConfirmAfter before it comes, and pushed at
// it: the read's latency must not make the push late (late pushes bunch at
// the vendor).
func TestStampedSlotIsConfirmedBeforeItComes(t *testing.T) {
	r := newRig(t)
	c := &confirmer{clock: r.clock, good: true}
	r.d.Can.Confirm, r.d.Work = c.Confirm, nil
	j := testJob(r.clock.Now())
	slot := r.clock.Now().Add(600 * time.Millisecond) // within BlockThreshold: slept for
	j.Payload, j.Deferrals, j.Hold.At = []byte(`{"n":1}`), 1, slot
	j.Hold.Grant.Version, j.Hold.Grant.Interval = 2, 100_000
	res, err := r.d.HandleJob(context.Background(), j)
	if err != nil || res.Outcome != Pushed {
		t.Fatalf("HandleJob = %+v, %v; want pushed", res, err)
	}
	if len(c.at) != 1 || !c.at[0].Equal(slot.Add(-limiter.ConfirmAfter)) {
		t.Fatalf("confirmed at %v, want once at the slot less ConfirmAfter (%v)", c.at, slot.Add(-limiter.ConfirmAfter))
	}
	if !r.clock.Now().Equal(slot) {
		t.Fatalf("pushed at %v, want at the slot %v", r.clock.Now(), slot)
	}
}
