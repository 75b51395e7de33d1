package gcra

import (
	"errors"
	"math"
	"testing"
	"time"
)

const sec = int64(1_000_000)

var (
	cfg20 = Limit{Rate: 20, Burst: 20} // interval 50_000 µs
	ad    = Adaptive{MinRate: 2, Quiet: 10 * time.Second, Increase: 1}
	// halved is cfg20 halved at 100 s; capped is also capped at 12.5/s.
	halved = AdaptState{Base: 100_000, Since: 100 * sec, Version: 1}
	capped = AdaptState{Base: 100_000, Since: 100 * sec, Ceiling: 80_000, Version: 2}
)

func TestAdaptiveInterval(t *testing.T) {
	tests := []struct {
		name string
		s    AdaptState
		now  int64
		want int64
	}{
		{"never adapted: the configured interval", AdaptState{}, 5 * sec, 50_000},
		{"a ceiling alone caps the configured rate", AdaptState{Ceiling: 80_000}, 5 * sec, 80_000},
		{"right after a change: the base", halved, 100 * sec, 100_000},
		{"through the quiet period: the base", halved, 110 * sec, 100_000},
		{"a clock behind the change: the base", halved, 90 * sec, 100_000},
		{"1 s into the climb: 11/s", halved, 111 * sec, 90_910},
		{"5 s into the climb: 15/s", halved, 115 * sec, 66_667},
		{"10 s into the climb: back at the configured 20/s", halved, 120 * sec, 50_000},
		{"long after: never above the configured rate", halved, 1000 * sec, 50_000},
		{"the climb stops at the published ceiling (12.5/s)", capped, 1000 * sec, 80_000},
		{"two failed probes: the base holds for 4 × 10 s", AdaptState{Base: 100_000, Since: 100 * sec, Probes: 2, Version: 5}, 140 * sec, 100_000},
		{"two failed probes: 1 s into the climb after 40 s", AdaptState{Base: 100_000, Since: 100 * sec, Probes: 2, Version: 5}, 141 * sec, 90_910},
		{"a base faster than the configured rate is clamped", AdaptState{Base: 10_000, Since: 0, Version: 1}, 1, 50_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ad.Interval(tt.s, cfg20, tt.now); got != tt.want {
				t.Errorf("Interval = %d µs, want %d", got, tt.want)
			}
			if got := ad.Effective(tt.s, cfg20, tt.now); got.Interval() != tt.want || got.Burst != cfg20.Burst {
				t.Errorf("Effective = %+v (interval %d), want interval %d burst %d", got, got.Interval(), tt.want, cfg20.Burst)
			}
		})
	}
}

func TestAdaptiveClimbing(t *testing.T) {
	tests := []struct {
		name string
		s    AdaptState
		now  int64
		want bool
	}{
		{"never adapted: at the configured rate, no probe", AdaptState{}, 5 * sec, false},
		{"quiet after a change: holding the base", halved, 105 * sec, false},
		{"the quiet period's last instant: still the base", halved, 110 * sec, false},
		{"1 s into the climb: probing", halved, 111 * sec, true},
		{"9 s into the climb (19/s): probing", halved, 119 * sec, true},
		{"the climb reached the configured 20/s: done", halved, 125 * sec, false},
		{"the climb reached a published ceiling (12.5/s): done", capped, 104*sec + 10*sec, false},
		{"below that ceiling: probing", capped, 111 * sec, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ad.Climbing(tt.s, cfg20, tt.now); got != tt.want {
				t.Errorf("Climbing at %d s = %v, want %v", tt.now/sec, got, tt.want)
			}
		})
	}
}

// The bound proved in package limiter needs the interval never to grow
// between changes.
func TestAdaptiveIntervalNeverGrowsBetweenChanges(t *testing.T) {
	s := AdaptState{Base: 400_000, Since: 7 * sec, Ceiling: 60_000, Version: 3}
	prev := ad.Interval(s, cfg20, 0)
	for now := int64(0); now < 200*sec; now += 1_234 {
		iv := ad.Interval(s, cfg20, now)
		if iv > prev {
			t.Fatalf("interval grew from %d to %d µs at %d µs", prev, iv, now)
		}
		prev = iv
	}
	if prev != 60_000 {
		t.Errorf("settled at %d µs, want the ceiling 60000", prev)
	}
}

func TestAdaptiveThrottled(t *testing.T) {
	tests := []struct {
		name string
		s    AdaptState
		now  int64
		want AdaptState
	}{
		{"the first throttle halves the configured rate",
			AdaptState{}, 50 * sec,
			AdaptState{Base: 100_000, Since: 50 * sec, Version: 1}},
		{"a throttle within the quiet period halves again",
			AdaptState{Base: 100_000, Since: 50 * sec, Version: 1}, 55 * sec,
			AdaptState{Base: 200_000, Since: 55 * sec, Version: 2}},
		{"halving stops at the floor",
			AdaptState{Base: 400_000, Since: 50 * sec, Version: 4}, 51 * sec,
			AdaptState{Base: 500_000, Since: 51 * sec, Version: 5}},
		{"a throttle at the floor restarts the quiet period",
			AdaptState{Base: 500_000, Since: 50 * sec, Version: 5}, 55 * sec,
			AdaptState{Base: 500_000, Since: 55 * sec, Version: 6}},
		{"a probe above a base that held returns to the base, and the next quiet period doubles",
			AdaptState{Base: 100_000, Since: 50 * sec, Version: 1}, 63 * sec,
			AdaptState{Base: 100_000, Since: 63 * sec, Probes: 1, Version: 2}},
		// Base 2/s (the floor), halved there by throttles that were not
		// the pace's; the climb reached 20/s (quiet 10 s, then 18 s at
		// 1/s per second) before its throttle: the vendor took far more
		// than 2/s, and back at 2/s the fleet would stay there.
		{"a probe that climbed past twice the base returns to half the rate it reached",
			AdaptState{Base: 500_000, Since: 50 * sec, Version: 5}, 78 * sec,
			AdaptState{Base: 100_000, Since: 78 * sec, Probes: 1, Version: 6}},
		{"after a failed probe the base holds for 20 s: a throttle at 80 s is within it and halves",
			AdaptState{Base: 100_000, Since: 63 * sec, Probes: 1, Version: 2}, 80 * sec,
			AdaptState{Base: 200_000, Since: 80 * sec, Version: 3}},
		{"the second failed probe doubles it again",
			AdaptState{Base: 100_000, Since: 63 * sec, Probes: 1, Version: 2}, 85 * sec,
			AdaptState{Base: 100_000, Since: 85 * sec, Probes: 2, Version: 3}},
		{"the doublings stop at MaxProbeBackoff",
			AdaptState{Base: 100_000, Since: 0, Probes: MaxProbeBackoff, Version: 9}, 85 * sec,
			AdaptState{Base: 100_000, Since: 85 * sec, Probes: MaxProbeBackoff, Version: 10}},
		{"a throttle at the base after the quiet period, before the climb moved, halves",
			AdaptState{Base: 100_000, Since: 50 * sec, Version: 1}, 60 * sec,
			AdaptState{Base: 200_000, Since: 60 * sec, Version: 2}},
		{"the ceiling stays",
			AdaptState{Base: 80_000, Since: 50 * sec, Ceiling: 80_000, Version: 7}, 51 * sec,
			AdaptState{Base: 160_000, Since: 51 * sec, Ceiling: 80_000, Version: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ad.Throttled(tt.s, cfg20, tt.now, 0); got != tt.want {
				t.Errorf("Throttled = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAdaptivePublished(t *testing.T) {
	halved := AdaptState{Base: 100_000, Since: 50 * sec, Version: 1}
	capped := AdaptState{Base: 100_000, Since: 50 * sec, Ceiling: 100_000, Version: 2}
	tests := []struct {
		name           string
		s              AdaptState
		rate           float64
		now            int64
		want           AdaptState
		changed, lower bool
	}{
		{"the configured rate published: nothing", AdaptState{}, 20, sec, AdaptState{}, false, false},
		{"a higher rate published: nothing (the configured rate is the ceiling)", AdaptState{}, 50, sec, AdaptState{}, false, false},
		{"within 1%: nothing", AdaptState{}, 19.9, sec, AdaptState{}, false, false},
		{"180 per minute under 20/s lowers and caps",
			AdaptState{}, 180.0 / 60, sec,
			AdaptState{Base: 333_334, Since: sec, Ceiling: 333_334, Version: 1}, true, true},
		{"a lower limit than the halved rate lowers it",
			halved, 5, 51 * sec,
			AdaptState{Base: 200_000, Since: 51 * sec, Ceiling: 200_000, Version: 2}, true, true},
		{"the halved rate's own limit published, no cap yet: nothing",
			halved, 10, 51 * sec, halved, false, false},
		{"a raised limit lifts the cap; the climb resumes at once from the effective rate",
			capped, 15, 52 * sec,
			AdaptState{Base: 100_000, Since: 42 * sec, Ceiling: 66_667, Version: 3}, true, false},
		{"a raise to the configured rate removes the cap",
			capped, 25, 52 * sec,
			AdaptState{Base: 100_000, Since: 42 * sec, Version: 3}, true, false},
		{"zero: ignored", capped, 0, 52 * sec, capped, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, lower := ad.Published(tt.s, cfg20, tt.rate, tt.now)
			if got != tt.want || changed != tt.changed || lower != tt.lower {
				t.Errorf("Published = %+v, %v, %v; want %+v, %v, %v", got, changed, lower, tt.want, tt.changed, tt.lower)
			}
		})
	}
}

func TestAdaptiveSettled(t *testing.T) {
	tests := []struct {
		name string
		s    AdaptState
		want int64
	}{
		{"never adapted", AdaptState{}, 0},
		{"halved: quiet 10 s plus 10 s of climb", AdaptState{Base: 100_000, Since: 50 * sec, Version: 1}, 70 * sec},
		{"at the ceiling: quiet only", AdaptState{Base: 80_000, Since: 50 * sec, Ceiling: 80_000, Version: 1}, 60 * sec},
		{"after a failed probe: twice the quiet", AdaptState{Base: 100_000, Since: 50 * sec, Probes: 1, Version: 2}, 80 * sec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ad.Settled(tt.s, cfg20); got != tt.want {
				t.Errorf("Settled = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestAdaptiveValidate(t *testing.T) {
	tests := []struct {
		name  string
		a     Adaptive
		field string
	}{
		{"ok", ad, ""},
		{"no floor", Adaptive{Quiet: time.Second, Increase: 1}, "adaptive.min_rate"},
		{"floor above the rate", Adaptive{MinRate: 21, Quiet: time.Second, Increase: 1}, "adaptive.min_rate"},
		{"no quiet period", Adaptive{MinRate: 1, Increase: 1}, "adaptive.quiet"},
		{"no increase", Adaptive{MinRate: 1, Quiet: time.Second}, "adaptive.increase"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.a.Validate(cfg20)
			var ae *ArgumentError
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &ae) || ae.Field != tt.field):
				t.Fatalf("Validate = %v, want an *ArgumentError on %s", err, tt.field)
			}
		})
	}
}

func TestIntervalLimitRoundTrips(t *testing.T) {
	for iv := int64(1); iv < 2_000_000; iv = iv*3/2 + 1 {
		for _, d := range []int64{0, 1, 7} {
			if got := IntervalLimit(iv+d, 3).Interval(); got != iv+d {
				t.Fatalf("IntervalLimit(%d).Interval() = %d", iv+d, got)
			}
		}
	}
}

// TestAdaptiveBucketKeepsTheWindowBound drives a bucket through a throttle,
// the quiet period and the climb, taking every token the effective limit
// allows at each instant, and checks every window of the grants against a
// bound the test computes itself from the schedule it set, sharing nothing
// with Adaptive: the configured 20/s burst 20 halved to 10/s at 3 s, held
// for the 10 s quiet period, then 1/s more every second until 20/s again at
// 23 s. The highest rate in force over [t1, t2] is that schedule's at t2
// (it never falls after 3 s), and k grants in the window may be at most
// burst + that rate × (t2 − t1).
func TestAdaptiveBucketKeepsTheWindowBound(t *testing.T) {
	const step = 7_000 // µs between attempts
	// scheduled is the rate the test set for instant at (µs).
	scheduled := func(at int64) float64 {
		switch {
		case at < 3*sec:
			return 20
		case at <= 13*sec:
			return 10
		}
		return min(10+float64(at-13*sec)/1e6, 20)
	}
	var (
		tat   int64
		s     AdaptState
		times []int64
	)
	for now := int64(0); now < 40*sec; now += step {
		if now >= 3*sec && s.Version == 0 {
			s = ad.Throttled(s, cfg20, now, now)
			// The store empties the bucket at the new rate with the change.
			tat = max(tat, now+ad.Effective(s, cfg20, now).Tolerance())
		}
		l := ad.Effective(s, cfg20, now)
		for {
			d := Decide(tat, now, l, 1, 0)
			if !d.Allowed {
				break
			}
			tat = d.TAT
			times = append(times, now)
		}
	}
	if len(times) < 400 {
		t.Fatalf("only %d grants in 40 s: the bucket barely granted", len(times))
	}
	for i := range times {
		// spent is the time the grants of [times[i], times[j]] cost at
		// the scheduled rates, Σ 1/r(tₖ): a bucket at those rates books
		// that much from times[i] on, and grants the last one only if it
		// is booked at most its burst's worth (b/r) past times[j]. A rate
		// above the schedule (a climb too fast, a halving too mild) books
		// more than that; the fleet bound alone, b + r̂·W, can hide it.
		spent := 0.0
		for j := i; j < len(times); j++ {
			spent += 1 / scheduled(times[j])
			top := scheduled(times[j])
			if times[i] < 3*sec {
				top = 20 // the window reaches back before the throttle
			}
			w := float64(times[j]-times[i]) / 1e6
			if n := float64(j - i + 1); n > float64(cfg20.Burst)+top*w+1e-9 {
				t.Fatalf("%v grants in [%d, %d] µs, bound %v at the scheduled %v/s", n, times[i], times[j], float64(cfg20.Burst)+top*w, top)
			}
			// Intervals are whole µs, rounded up: up to 1 µs a grant.
			if slack := float64(j-i+1) * 1e-6; spent > w+float64(cfg20.Burst)/scheduled(times[j])+slack {
				t.Fatalf("grants in [%d, %d] µs cost %.6f s at the scheduled rates, more than the %.6f s window and a burst at %v/s",
					times[i], times[j], spent, w, scheduled(times[j]))
			}
		}
	}
	// Lower bounds, from the same schedule: the quiet period granted at
	// 10/s (within a burst), and the climb got back to 20/s in the last 10 s.
	count := func(from, to int64) int {
		n := 0
		for _, at := range times {
			if at >= from && at < to {
				n++
			}
		}
		return n
	}
	if n := count(4*sec, 13*sec); n < 89 || n > 91 {
		t.Errorf("%d grants from 4 s to 13 s, want about 90 (10/s held through the quiet period)", n)
	}
	if n := count(30*sec, 40*sec); n < 195 || n > 201 {
		t.Errorf("%d grants in the last 10 s, want about 200 (20/s)", n)
	}
}

// A throttle's quiet period starts when its Retry-After ends: the fleet
// sends nothing before then, and a quiet period counted from the 429 would
// be spent in silence, the climb starting before the lower rate was ever
// tried. Throttled at 50 s with a Retry-After of 30 s (quiet 10 s, 1/s per
// second): 10/s held until 90 s, then 11/s at 91 s, 20/s at 100 s.
func TestQuietPeriodCountsFromTheEndOfRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		now, until int64 // the throttle's
		at         int64 // when the interval is read
		want       int64 // µs
	}{
		{"inside the Retry-After: the halved rate", 50 * sec, 80 * sec, 70 * sec, 100_000},
		{"after Retry-After, within the quiet period counted from its end", 50 * sec, 80 * sec, 85 * sec, 100_000},
		{"the quiet period's last instant", 50 * sec, 80 * sec, 90 * sec, 100_000},
		{"1 s into the climb: 11/s", 50 * sec, 80 * sec, 91 * sec, 90_910},
		{"10 s into the climb: 20/s", 50 * sec, 80 * sec, 100 * sec, 50_000},
		{"no Retry-After: counted from the throttle", 50 * sec, 0, 61 * sec, 90_910},
		{"a Retry-After already over: counted from the throttle", 50 * sec, 49 * sec, 61 * sec, 90_910},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ad.Throttled(AdaptState{}, cfg20, tt.now, tt.until)
			if got := ad.Interval(s, cfg20, tt.at); got != tt.want {
				t.Errorf("interval at %d s = %d µs, want %d (state %v)", tt.at/sec, got, tt.want, s)
			}
		})
	}
	// The state is kept until the climb ends: 80 s + 10 s + 10 s.
	if got := ad.Settled(ad.Throttled(AdaptState{}, cfg20, 50*sec, 80*sec), cfg20); got != 100*sec {
		t.Errorf("Settled = %d µs, want %d", got, 100*sec)
	}
}

// A published rate is floored at MinRate, like every decrease: a tiny one
// (a misread header, a window of days) must neither stop the fleet nor make
// a tolerance (burst × interval) that overflows int64 µs. What is no rate
// at all is refused by CheckPublished and changes nothing.
func TestPublishedRateIsFlooredAndChecked(t *testing.T) {
	const floorIV = 500_000 // ad.MinRate, 2/s
	tests := []struct {
		name    string
		rate    float64
		refused bool
		want    int64 // the interval published; 0: nothing changes
	}{
		{"1/s, below the 2/s floor: floored", 1, false, floorIV},
		{"1e-12/s: floored, no overflow", 1e-12, false, floorIV},
		{"the smallest float: floored", math.SmallestNonzeroFloat64, false, floorIV},
		{"5/s: taken as published", 5, false, 200_000},
		{"zero: refused", 0, true, 0},
		{"negative: refused", -4, true, 0},
		{"NaN: refused", math.NaN(), true, 0},
		{"+Inf: refused", math.Inf(1), true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ad.CheckPublished(tt.rate)
			var ae *ArgumentError
			if tt.refused != (err != nil) || err != nil && (!errors.As(err, &ae) || ae.Field != "rate") {
				t.Fatalf("CheckPublished(%v) = %v, want refused %v on field rate", tt.rate, err, tt.refused)
			}
			next, changed, lower := ad.Published(AdaptState{}, cfg20, tt.rate, sec)
			if tt.want == 0 {
				if changed || next != (AdaptState{}) {
					t.Fatalf("Published(%v) = %+v, %v; want nothing changed", tt.rate, next, changed)
				}
				return
			}
			if !changed || !lower || next.Base != tt.want || next.Ceiling != tt.want {
				t.Fatalf("Published(%v) = %+v, changed %v, lower %v; want base and ceiling %d µs, lowered", tt.rate, next, changed, lower, tt.want)
			}
			if tol := ad.Effective(next, cfg20, sec).Tolerance(); tol != int64(cfg20.Burst)*tt.want {
				t.Fatalf("tolerance %d µs, want burst × %d = %d", tol, tt.want, int64(cfg20.Burst)*tt.want)
			}
		})
	}
	// At the floor already, a tinier rate changes nothing.
	atFloor := AdaptState{Base: floorIV, Since: sec, Ceiling: floorIV, Version: 1}
	if next, changed, _ := ad.Published(atFloor, cfg20, 1e-9, 2*sec); changed {
		t.Errorf("Published at the floor = %+v, want nothing changed", next)
	}
}
