package config

import (
	"fmt"
	"math"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// DefaultMargin is the margin an endpoint keeps unless its "margin" says
// otherwise: about twice the latest a request left otapush after its slot
// in the steady state of the fairness benchmark (8 processes × 5 pushers
// on the 2-core reference machine: max 18–50 ms; docs/design.md, "the
// margin", also gives what a fleet that starts all at once needs). At rate
// r it costs r·100ms tokens of the burst, none of the rate.
const DefaultMargin = 100 * time.Millisecond

// MaxMargin bounds "margin": a jitter longer than this is an outage, not
// jitter, and a margin that long would spend most bursts.
const MaxMargin = 10 * time.Second

// KeptMargin is the margin the endpoint's buckets keep (see
// limiter.Limit.Margin): its "margin", or DefaultMargin cut to what the
// burst can spare, so that a burst too small for it keeps what a push
// needs. It assumes a validated endpoint.
func (e Endpoint) KeptMargin() time.Duration {
	if e.Margin != "" {
		d, _ := time.ParseDuration(e.Margin)
		return d
	}
	spare := e.Limit.Burst - e.needTokens()
	if spare <= 0 || e.Limit.Rate <= 0 {
		return 0
	}
	T := time.Duration(limiter.Limit{Rate: e.Limit.Rate, Burst: e.Limit.Burst}.Interval()) * time.Microsecond
	return min(DefaultMargin, time.Duration(spare)*T)
}

// needTokens is what the margin must leave of the burst: one push's
// tokens (an item's weight on an endpoint metered by items), plus the
// urgent reserve normal pushes leave free.
func (e Endpoint) needTokens() int {
	need := max(int(math.Ceil(e.ItemCost())), 1)
	if e.UrgentReserve > 0 && !e.Urgent() {
		need += e.UrgentReserve
	}
	return need
}

// withMargin is l keeping the endpoint's margin.
func (e Endpoint) withMargin(l limiter.Limit) limiter.Limit {
	l.Margin = e.KeptMargin()
	return l
}

// validateMargin checks an endpoint's margin; at is the endpoint's place in
// the file.
func validateMargin(at string, e Endpoint) []error {
	if e.Margin == "" {
		return nil
	}
	d, err := time.ParseDuration(e.Margin)
	switch {
	case err != nil:
		return []error{fmt.Errorf("%s.margin: %q is not a duration, want e.g. \"100ms\" (\"0s\" for none)", at, e.Margin)}
	case d < 0 || d > MaxMargin:
		return []error{fmt.Errorf("%s.margin: %s, want 0s to %s", at, e.Margin, MaxMargin)}
	case e.Limit.Rate <= 0 || e.Limit.Burst < 1:
		return nil // the limit's own error says it
	}
	// The margin takes rate·margin tokens of the burst: what is left must
	// hold a push (and the urgent reserve, which normal pushes leave).
	T := limiter.Limit{Rate: e.Limit.Rate, Burst: e.Limit.Burst}.Interval()
	if left := float64(int64(e.Limit.Burst)*T-d.Microseconds()) / float64(T); left < float64(e.needTokens()) {
		return []error{fmt.Errorf("%s.margin: %s keeps %.2f of limit.burst %d free at rate %v/s, leaving %.2f tokens where a push needs %d (item_weight and urgent_reserve included): lower margin to at most %s, or raise limit.burst",
			at, e.Margin, e.Limit.Rate*d.Seconds(), e.Limit.Burst, e.Limit.Rate, left, e.needTokens(), time.Duration(int64(e.Limit.Burst-e.needTokens())*T)*time.Microsecond)}
	}
	return nil
}
