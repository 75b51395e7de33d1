package sim

import (
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// breakerCooldown is how long each process's limiter stops calling the
// store after repeated failures (limiter.WithCircuitBreaker in run.go).
const breakerCooldown = 10 * time.Second

// localSpans are the stretches of a run (from its start) in which a
// process may push on its local share: from an outage's start (of the
// whole store or the limiter's table) until the last breaker it opened
// has closed, a breakerCooldown after the outage's end, and a push
// granted by then has left (a push's time, pushTimeout).
func localSpans(f Faults, pushTimeout time.Duration) [][2]time.Duration {
	var spans [][2]time.Duration
	for _, o := range [][2]time.Duration{f.DBOutage, f.LimiterOutage} {
		if o[1] > o[0] {
			spans = append(spans, [2]time.Duration{o[0], o[1] + breakerCooldown + pushTimeout})
		}
	}
	return spans
}

// localSpan reports whether now lies where a LocalShare channel's
// processes may push on their local shares.
func (v *Vendor) localSpan(now time.Time) bool {
	if !v.spec.LocalShare {
		return false
	}
	for _, s := range v.localSpans {
		if within(s, v.start, now) {
			return true
		}
	}
	return false
}

// localLimit is limit l of a published burst b (l's Burst already holds
// the allowance) with what local shares add (docs/configuration.md,
// on_store_unavailable): each of N processes paces rate ÷ N with a burst
// of max(1, ⌊b ÷ N⌋), so in any window W the processes pacing locally
// send at most N·max(1, ⌊b ÷ N⌋) + rate·W beside the shared bucket's
// grants to the others.
func (v *Vendor) localLimit(l window.Limit, b int) window.Limit {
	n := max(v.instances, 1)
	return window.Limit{Rate: 2 * l.Rate, Burst: l.Burst + n*max(1, b/n)}
}
