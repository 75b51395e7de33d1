package integration

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// A throttle revokes the slots booked before it that fall inside its
// Retry-After, even where the rate did not change (here it is at its
// floor): the vendor asked for silence until then. Slots after it, at the
// rate that still holds, stand. Each confirmation reads the bucket once,
// but for one this process already knows is revoked.
func TestSlotsInsideARetryAfterAreRevoked(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	ctx := context.Background()
	b := limiter.Bucket{Key: "booking_com#cred-1#rates", Limit: limiter.PerSecond(20, 2),
		Adaptive: &limiter.Adaptive{MinRate: 10, Quiet: time.Minute, Increase: 1}}
	w, a := newWorker(t, table, limiter.WithClock(clock.Now)), newWorker(t, table, limiter.WithClock(clock.Now))
	t0 := clock.Now()
	r0, err := a.Take(ctx, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Throttle(ctx, b, stampOf(r0), t0); err != nil { // 20/s → the 10/s floor
		t.Fatal(err)
	}
	// W books 3 s ahead at 10/s.
	var slots []limiter.Reservation
	for range 30 {
		r, err := w.Reserve(ctx, b, 1, 4*time.Second)
		if err != nil || math.Abs(r.Rate-10) > 1e-9 {
			t.Fatalf("booking ahead: %+v, %v; want slots at 10/s", r, err)
		}
		slots = append(slots, r)
	}
	early, late := slots[10], slots[29]
	if early.Slot.After(t0.Add(1500*time.Millisecond)) || late.Slot.Before(t0.Add(2500*time.Millisecond)) {
		t.Fatalf("slots at t0+%v and t0+%v, want one before t0+1.5s and one after t0+2.5s", early.Slot.Sub(t0), late.Slot.Sub(t0))
	}
	// At 0.5 s the vendor throttles a push at 10/s with Retry-After until
	// t0+2s; the rate stays at its floor.
	clock.Set(t0.Add(500 * time.Millisecond))
	if err := a.Throttle(ctx, b, stampOf(slots[0]), t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	confirm := func(r limiter.Reservation, want bool, reads int64) {
		t.Helper()
		clock.Set(r.Slot)
		s, _ := r.Stamp()
		before := w.calls.Calls()
		got, err := w.Confirm(ctx, b, s)
		if err != nil {
			t.Fatal(err)
		}
		if n := w.calls.Calls() - before; got != want || n != reads {
			t.Fatalf("Confirm of the slot at t0+%v = %v after %d reads, want %v after %d", r.Slot.Sub(t0), got, n, want, reads)
		}
	}
	confirm(early, false, 1)     // inside the Retry-After: revoked
	confirm(slots[11], false, 0) // W knows now: no read
	confirm(late, true, 1)       // after it, at the same rate: stands
	if st, err := w.State(ctx, b); err != nil || math.Abs(st.Rate-10) > 1e-9 || st.Adapt.Version != 2 {
		t.Fatalf("state %+v, %v; want version 2 at the 10/s floor", st, err)
	}
}
