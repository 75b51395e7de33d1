package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// A channel with on_store_unavailable local-share is checked, within reach
// of a store outage, against what that mode documents: a process whose
// breaker is still open after the outage paces on its local share while
// the others use the shared bucket (adversary seed 31 with seed 20's
// pinned parts: one local push 5 ms after a shared one, 3 arrivals in
// 498 ms at 2/s and burst 1 + 1, about 1 run in 6). Outside that reach, on
// a channel without the mode, and past the local shares' own bound, the
// window is still a violation.
func TestVendorChecksLocalSharesAgainstTheirDocumentedBound(t *testing.T) {
	// The outage 2–7 s: processes may push locally until 7 s + the
	// breaker's 10 s + a 2 s push, 19 s.
	spans := localSpans(Faults{DBOutage: [2]time.Duration{2 * time.Second, 7 * time.Second}}, 2*time.Second)
	seed31 := []time.Duration{0, 5 * time.Millisecond, 498 * time.Millisecond}
	for _, tt := range []struct {
		name       string
		localShare bool
		from       time.Duration
		sends      []time.Duration
		want       int
	}{
		{"a local push beside the shared bucket after the outage", true, 12240 * time.Millisecond, seed31, 0},
		{"the same sends out of the outage's reach", true, 19 * time.Second, seed31, 1},
		{"the same sends on a channel that fails closed", false, 12240 * time.Millisecond, seed31, 1},
		// 1 + 1 (the allowance) + 8 processes' bursts of 1 at once.
		{"more than every local burst at once", true, 3 * time.Second, make([]time.Duration, 12), 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVendor("airbnb", 0, nil, rand.New(rand.NewPCG(1, 2)), Latency{}, window.Limit{Rate: 2, Burst: 1}, nil)
			v.spec, v.allowance, v.localSpans, v.instances = VendorSpec{LocalShare: tt.localShare}, 1, spans, 8
			for _, d := range tt.sends {
				v.watch("token-TOKEN_AIRBNB_1/restrictions", v.start.Add(tt.from+d), 1)
			}
			if v.Violations != tt.want {
				t.Errorf("violations %d (%s), want %d", v.Violations, v.FirstViolation, tt.want)
			}
		})
	}
}
