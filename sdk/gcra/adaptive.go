package gcra

import (
	"fmt"
	"math"
	"time"
)

// Adaptive makes a bucket's rate follow the vendor's throttling instead of
// trusting the configured rate, which is only a guess when a vendor does not
// publish its limit or changes it without notice.
//
// The configured Limit stays the ceiling. On a throttle signal the
// effective rate drops (Throttled); after Quiet with no further change it
// climbs back linearly, Increase tokens/s per second, to the configured rate
// or to the limit the vendor publishes, whichever is lower (Published).
// Everything a worker needs to compute the effective rate at any instant is
// an AdaptState, which the store keeps beside tat, and the time: the climb
// costs no write.
type Adaptive struct {
	// MinRate is the floor a decrease never goes below (tokens/s): > 0 and
	// at most the configured rate.
	MinRate float64
	// Quiet is how long the rate holds after a change before it climbs.
	Quiet time.Duration
	// Increase is how fast it climbs once quiet, in tokens/s per second.
	Increase float64
}

// Validate reports, as an *ArgumentError on "adaptive.*", what makes a
// unusable with l.
func (a Adaptive) Validate(l Limit) error {
	switch {
	case math.IsNaN(a.MinRate) || a.MinRate <= 0 || a.MinRate > l.Rate:
		return argErr("adaptive.min_rate", "%v, want > 0 and at most the limit's rate %v", a.MinRate, l.Rate)
	case a.Quiet <= 0:
		return argErr("adaptive.quiet", "%v, want > 0", a.Quiet)
	case a.Quiet > 24*time.Hour:
		return argErr("adaptive.quiet", "%v, want at most 24h", a.Quiet)
	case math.IsNaN(a.Increase) || math.IsInf(a.Increase, 0) || a.Increase <= 0:
		return argErr("adaptive.increase", "%v, want a finite number > 0 of tokens/s per second", a.Increase)
	}
	return (Limit{Rate: a.MinRate, Burst: l.Burst}).Validate()
}

// AdaptState is what the store keeps of an adaptive bucket beside tat. The
// zero value is a bucket that never adapted: the configured limit.
type AdaptState struct {
	// Base is the emission interval (µs) the last change set; 0 for none.
	Base int64
	// Since is when the last change was made (µs).
	Since int64
	// Ceiling is the interval (µs) of a limit the vendor published below
	// the configured one; 0 for none.
	Ceiling int64
	// Probes counts the climbs in a row that ended in a throttle and a
	// return to Base: each doubles the quiet period before the next climb,
	// up to MaxProbeBackoff doublings, so a fleet at a limit it found
	// probes above it less and less often. A halving or a raised published
	// limit sets it back to 0.
	Probes int64
	// Version counts changes. Every write that uses the state is
	// conditional on it, so no worker grants at a rate the others have
	// left.
	Version int64
}

// MaxProbeBackoff bounds the doublings of the quiet period after failed
// probes: at most 2^2 = 4 quiet periods between climbs, which bounds how
// long a raised limit goes unnoticed.
const MaxProbeBackoff = 2

// quiet is how long s holds before it climbs: Quiet, doubled per failed
// probe.
func (a Adaptive) quiet(s AdaptState) int64 {
	return a.Quiet.Microseconds() << min(max(s.Probes, 0), MaxProbeBackoff)
}

// target is the interval the climb ends at: the configured one, or the
// vendor's published limit if that is slower.
func (s AdaptState) target(l Limit) int64 { return max(l.Interval(), s.Ceiling) }

// Interval is the effective emission interval (µs) at now. Between two
// changes it never grows as now advances (the rate only climbs), which is
// what keeps GCRA's bound with a varying interval (see package limiter).
func (a Adaptive) Interval(s AdaptState, l Limit, now int64) int64 {
	floor := s.target(l)
	if s.Base == 0 {
		return floor
	}
	quiet := now - s.Since - a.quiet(s)
	if quiet <= 0 {
		return max(s.Base, floor)
	}
	r := 1e6/float64(s.Base) + a.Increase*float64(quiet)/1e6
	return max(intervalOf(r), floor)
}

// Climbing reports whether at now the rate of s is above the rate that
// held (Base) and below where the climb ends: the fleet is probing for a
// higher limit, and a throttle is likely to end the probe.
func (a Adaptive) Climbing(s AdaptState, l Limit, now int64) bool {
	iv := a.Interval(s, l, now)
	return s.Base != 0 && iv < s.Base && iv > s.target(l)
}

// Effective is l at the effective rate at now: the same burst and margin,
// the interval Interval returns.
func (a Adaptive) Effective(s AdaptState, l Limit, now int64) Limit {
	e := IntervalLimit(a.Interval(s, l, now), l.Burst)
	e.Margin = l.Margin
	return e
}

// Throttled is the state after a throttle signal at now whose Retry-After
// ends at until (µs; at or before now for none). It always changes (a
// throttle restarts the quiet period even at the floor):
//   - a rate climbing above a Base that held for its quiet period returns
//     to Base, or to half the rate it reached if that is higher, and the
//     next quiet period is twice as long (Probes);
//   - otherwise the effective rate halves, but not below MinRate.
//
// The quiet period counts from the end of Retry-After (Since is the later
// of now and until): the fleet sends nothing before then, so a quiet period
// counted from the 429 would be spent, in part or whole, on silence, and
// the climb would start before the lower rate was ever tried. Since is
// therefore also when the penalty ends, which Confirm uses to revoke slots
// booked before the throttle that lie inside it.
//
// Halving on every throttle (plain AIMD) saws between the vendor's limit and
// half of it, 75% on average. Returning to the rate that held keeps the
// fleet at the limit it found, and a probe above it costs one episode of
// throttling, ever less often. But Base is only what halvings left, and
// throttles that were not the pace's (requests larger than the vendor
// takes, slots booked before a change) can halve it to MinRate, far below
// the vendor: a climb that got past twice Base before its throttle showed
// the vendor takes more, and returning to Base would hold the fleet at a
// fraction of the vendor for good (adversary seed 696: 0.31/s against a
// vendor at 2.5/s, every probe climbing to 5/s). It returns to half the rate
// it reached, where a halving from there would have left it.
func (a Adaptive) Throttled(s AdaptState, l Limit, now, until int64) AdaptState {
	cur := a.Interval(s, l, now)
	next := AdaptState{Since: max(now, until), Ceiling: s.Ceiling, Version: s.Version + 1}
	if s.Base != 0 && now-s.Since >= a.quiet(s) && cur < s.Base {
		next.Base, next.Probes = min(s.Base, halfRate(cur)), min(s.Probes+1, MaxProbeBackoff)
		return next
	}
	next.Base = max(intervalOf(max(1e6/float64(cur)/2, a.MinRate)), l.Interval())
	return next
}

// halfRate is the interval of half the rate of interval iv.
func halfRate(iv int64) int64 { return intervalOf(1e6 / float64(iv) / 2) }

// publishedSlack is how far a published rate must differ from the
// effective one to count as a change: vendors round their windows, and a
// limit of 100/60s should not flap against a configured 1.6667/s.
const publishedSlack = 0.01

// CheckPublished reports, as an *ArgumentError on "rate", a published
// rate that is no rate at all: NaN, infinite, or not above 0. Anything
// else is a rate Published can act on (floored at MinRate).
func (a Adaptive) CheckPublished(rate float64) error {
	if math.IsNaN(rate) || math.IsInf(rate, 0) || rate <= 0 {
		return argErr("rate", "%v, want a finite number of tokens/s > 0", rate)
	}
	return nil
}

// Published is the state after the vendor published a limit of rate
// tokens/s at now, and whether that changed anything:
//   - a rate lower than the effective one lowers it at once to the
//     published rate, but never below MinRate, and caps the climb there
//     (lower reports true: the store must also empty the bucket, see
//     package limiter);
//   - a rate higher than a cap set before raises the cap, and the climb
//     resumes at once from the effective rate, so the fleet finds a raised
//     limit in (new − current)/Increase;
//   - anything else, and a rate CheckPublished refuses, changes nothing.
//
// The floor is what Throttled keeps too: a vendor that announces a tiny
// limit (a misread header, a window of days) must not stop the fleet for
// good, nor make an interval whose tolerance (burst × interval)
// overflows.
func (a Adaptive) Published(s AdaptState, l Limit, rate float64, now int64) (next AdaptState, changed, lower bool) {
	if a.CheckPublished(rate) != nil {
		return s, false, false
	}
	cur := a.Interval(s, l, now)
	pub := max(intervalOf(max(rate, a.MinRate)), l.Interval())
	switch {
	case float64(pub) > float64(cur)*(1+publishedSlack):
		return AdaptState{Base: pub, Since: now, Ceiling: pub, Version: s.Version + 1}, true, true
	case s.Ceiling != 0 && float64(pub) < float64(s.Ceiling)*(1-publishedSlack):
		ceiling := pub
		if pub <= l.Interval() {
			ceiling = 0
		}
		return AdaptState{Base: cur, Since: now - a.Quiet.Microseconds(), Ceiling: ceiling, Version: s.Version + 1}, true, false
	}
	return s, false, false
}

// Settled is when the climb from s reaches its target (µs), 0 for a state
// that never changed: how long the store must keep the state for the
// fleet to remember it.
func (a Adaptive) Settled(s AdaptState, l Limit) int64 {
	if s.Base == 0 {
		return 0
	}
	rb, rt := 1e6/float64(s.Base), 1e6/float64(s.target(l))
	climb := int64(0)
	if rt > rb {
		climb = int64(math.Ceil((rt - rb) / a.Increase * 1e6))
	}
	return s.Since + a.quiet(s) + min(climb, maxTolerance)
}

// intervalOf is the emission interval of rate r, rounded up like
// Limit.Interval.
func intervalOf(r float64) int64 { return int64(math.Ceil(1e6 / r)) }

// IntervalLimit is a Limit whose Interval is exactly iv µs: the rate is
// 1e6/iv nudged by the last bit float division may have cost, since
// Interval rounds up and a rate a hair too low would add a microsecond.
func IntervalLimit(iv int64, burst int) Limit {
	iv = max(iv, 1)
	l := Limit{Rate: 1e6 / float64(iv), Burst: burst}
	for i := 0; i < 4 && l.Interval() != iv; i++ {
		if l.Interval() > iv {
			l.Rate = math.Nextafter(l.Rate, math.Inf(1))
		} else {
			l.Rate = math.Nextafter(l.Rate, 0)
		}
	}
	return l
}

// String is the state for logs and operators.
func (s AdaptState) String() string {
	if s.Base == 0 {
		return "configured rate"
	}
	return fmt.Sprintf("base %.4g/s since %s, ceiling %d µs, version %d",
		1e6/float64(s.Base), time.UnixMicro(s.Since).UTC().Format(time.RFC3339Nano), s.Ceiling, s.Version)
}
