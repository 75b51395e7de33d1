package limitertest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// A learned in-flight cap moves as the Limiter's: none until a throttle
// lowers it, to half the requests then at the vendor; one below the cap
// in force after that; not for a request sent before the last lowering,
// nor by a lowering a fault answered; climbing by one each quiet period.
// Each lowering is a call, with the requests in flight as its N.
func TestLearnedInFlightCap(t *testing.T) {
	clock := NewClock(t0)
	down := false
	l := New(WithClock(clock.Now), WithFault(func(op, _ string) error {
		if down && op == "LowerInFlight" {
			return fmt.Errorf("%w: store down", limiter.ErrUnavailable)
		}
		return nil
	}))
	ctx := t.Context()
	steps := []struct {
		name     string
		inFlight int
		sent     time.Duration // after the clock's now
		advance  time.Duration // the clock moved before the step
		down     bool
		want     int // the cap after the step
	}{
		{"nothing learned", 0, 0, 0, false, 0},
		{"6 at the vendor: half", 6, 0, 0, false, 3},
		{"then 2: one below the cap in force", 2, 0, time.Second, false, 2},
		{"a request sent before that lowering: nothing", 5, -2 * time.Second, time.Second, false, 2},
		{"a lowering the store never took: nothing", 5, 0, 0, true, 2},
		{"a quiet period on: climbed by one", 0, 0, limiter.CapQuiet, false, 3},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		down = s.down
		if s.inFlight > 0 {
			err := l.LowerInFlight(ctx, "k", s.inFlight, clock.Now().Add(s.sent))
			if s.down != errors.Is(err, limiter.ErrUnavailable) || !s.down && err != nil {
				t.Fatalf("%s: LowerInFlight = %v", s.name, err)
			}
		}
		if got := l.InFlightCap("k"); got != s.want {
			t.Fatalf("%s: InFlightCap = %d, want %d", s.name, got, s.want)
		}
	}
	if got := l.InFlightCap("other"); got != 0 {
		t.Fatalf("another bucket's cap = %d, want 0 (none learned)", got)
	}
	if err := l.LowerInFlight(ctx, "", 2, clock.Now()); !errors.Is(err, limiter.ErrInvalidArgument) {
		t.Fatalf("LowerInFlight of an empty key = %v, want ErrInvalidArgument", err)
	}
	want := []Call{{Op: "LowerInFlight", Key: "k", N: 6}, {Op: "LowerInFlight", Key: "k", N: 2}, {Op: "LowerInFlight", Key: "k", N: 5},
		{Op: "LowerInFlight", Key: "k", N: 5}, {Op: "LowerInFlight", Key: "", N: 2}}
	if got := l.Calls(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Calls = %v, want %v", got, want)
	}
}
