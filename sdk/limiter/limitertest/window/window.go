// Package window checks a recording of arrivals against a rate limit the
// way a vendor would: it counts arrivals in sliding windows and compares
// each count with what a limit of rate r and burst b allows in a window of
// width W, namely b + r·W. It is the mock OTA's check and the oracle of the
// SDK's own tests, written apart from sdk/gcra (it imports nothing of the
// SDK, not even its rounding) so that it can catch that package's bugs; a
// service can use it the same way, to assert that what reached its vendor
// stayed within the limit.
//
// It holds nothing but a list of arrival times. Fullest and Check read a
// finished recording (the vendor-side invariant a test asserts); Log decides
// arrivals one at a time, for a mock vendor that enforces the limit with
// this code instead of a token bucket.
//
// Windows are closed intervals [first arrival, last arrival], so n arrivals
// at one instant form a window of width 0 that allows exactly b. Every
// window worth checking starts and ends on an arrival: widening a window
// without adding arrivals only raises its bound.
package window

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Limit is what the vendor allows: Burst arrivals at once, Rate a second
// after that.
type Limit struct {
	Rate  float64 // arrivals per second, > 0
	Burst int     // ≥ 1
}

// Validate reports a limit that would make every check meaningless.
func (l Limit) Validate() error {
	if !(l.Rate > 0) || l.Rate > 1e9 {
		return fmt.Errorf("window: rate %v, want 0 < rate ≤ 1e9 per second", l.Rate)
	}
	if l.Burst < 1 {
		return fmt.Errorf("window: burst %d, want ≥ 1", l.Burst)
	}
	return nil
}

// Bound is what the limit allows in a window of width w: Burst + Rate·w.
func (l Limit) Bound(w time.Duration) float64 {
	return float64(l.Burst) + l.Rate*w.Seconds()
}

// over says whether n arrivals exceed the limit over a window of width w:
// n − burst > rate·w, compared in nanoseconds, (n − burst)·1e9 > rate·w_ns,
// so that no division rounds (w.Seconds() of 300ms is not exactly 0.3). The
// half a nanosecond of slack absorbs the rounding of the one product, and
// is far below the microsecond an early arrival is late by at the least.
func (l Limit) over(n int, w time.Duration) bool {
	return float64(n-l.Burst)*1e9 > l.Rate*float64(w.Nanoseconds())+0.5
}

// Window is one window of a recording.
type Window struct {
	From, To time.Time // its first and last arrival
	Arrivals int       // arrivals in [From, To]
	Bound    float64   // Burst + Rate·(To − From)
}

// Width is To − From.
func (w Window) Width() time.Duration { return w.To.Sub(w.From) }

// Ratio is Arrivals ÷ Bound: above 1 the limit was broken in this window.
func (w Window) Ratio() float64 {
	if w.Bound <= 0 {
		return 0
	}
	return float64(w.Arrivals) / w.Bound
}

func (w Window) String() string {
	return fmt.Sprintf("%d arrivals in %v (from %s), bound %.2f (%.1f%%)",
		w.Arrivals, w.Width(), w.From.Format("15:04:05.000000"), w.Bound, 100*w.Ratio())
}

// Fullest returns the window with the highest Arrivals ÷ Bound over every
// pair of arrivals (in any order; they are sorted on a copy), and whether
// any window broke the limit (a count above its bound). With no arrivals
// it returns the zero Window and false.
//
// It looks at all n·(n+1)/2 windows: a recording of a few thousand
// arrivals takes milliseconds, and an exhaustive search has no cleverness
// to get wrong.
func Fullest(arrivals []time.Time, l Limit) (Window, bool) {
	ts := slices.Clone(arrivals)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var (
		best   Window
		bestR  = -1.0
		broken bool
	)
	for i := range ts {
		for j := i; j < len(ts); j++ {
			n, w := j-i+1, ts[j].Sub(ts[i])
			if l.over(n, w) {
				broken = true
			}
			win := Window{From: ts[i], To: ts[j], Arrivals: n, Bound: l.Bound(w)}
			// Of windows equally full (to float rounding), report the one
			// with the most arrivals: it says more about a run.
			if r := win.Ratio(); r > bestR+1e-9 || r > bestR-1e-9 && n > best.Arrivals {
				best, bestR = win, max(r, bestR)
			}
		}
	}
	return best, broken
}

// Check returns an error describing the fullest window if any window holds
// more arrivals than the limit allows, and nil otherwise.
func Check(arrivals []time.Time, l Limit) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if w, broken := Fullest(arrivals, l); broken {
		return fmt.Errorf("limit rate %g/s burst %d broken: %v", l.Rate, l.Burst, w)
	}
	return nil
}

// Log decides arrivals against a limit: Admit accepts an arrival when every
// window ending at it stays within its bound, and remembers it. The zero
// Log is empty and ready. It is not safe for concurrent use.
type Log struct {
	accepted []time.Time // in order; see prune for what is dropped
}

// Decision is Log's answer to one arrival.
type Decision struct {
	Allowed bool
	// Wait is, when refused, how long until the same arrival would fit:
	// every window ending then would stay within its bound.
	Wait time.Duration
	// Remaining is how many more arrivals at the same instant would be
	// accepted after this one.
	Remaining int
}

// Admit decides an arrival at now, which must not precede the last
// accepted one (the caller reads its clock under the lock it holds).
//
// For each accepted arrival a_i, the window [a_i, now] holds the arrivals
// since a_i plus this one, k of them; it fits iff k ≤ b + r·(now − a_i).
// When it does not, it will at a_i + (k − b)/r, since no arrival joins the
// window meanwhile; the latest of those is the wait.
func (g *Log) Admit(now time.Time, l Limit) Decision {
	allowed, wait := true, time.Duration(0)
	remaining := l.Burst - 1 // the window [now, now] holds this arrival alone
	for i := len(g.accepted) - 1; i >= 0; i-- {
		a := g.accepted[i]
		k := len(g.accepted) - i + 1
		w := now.Sub(a)
		if l.over(k, w) {
			allowed = false
			// Rounded up: an arrival told to come back a nanosecond early
			// would be refused again.
			at := a.Add(time.Duration(math.Ceil(float64(k-l.Burst) * 1e9 / l.Rate)))
			wait = max(wait, at.Sub(now))
		} else {
			remaining = min(remaining, int(l.Bound(w)+1e-9)-k)
		}
	}
	if !allowed {
		return Decision{Wait: max(wait, time.Microsecond), Remaining: 0}
	}
	g.accepted = append(g.accepted, now)
	g.prune(l)
	return Decision{Allowed: true, Remaining: max(remaining, 0)}
}

// prune forgets the oldest accepted arrival while a later one makes its
// windows redundant: if arrivals i..j−1 (j − i of them) fit within the rate
// alone over [a_i, a_j], that is j − i ≤ r·(a_j − a_i), then any window
// [a_i, t] fits whenever [a_j, t] does. It checks against the newest
// arrival, which keeps the log to about a burst's worth under steady load.
func (g *Log) prune(l Limit) {
	last := len(g.accepted) - 1
	drop := 0
	for drop < last && float64(last-drop) <= l.Rate*g.accepted[last].Sub(g.accepted[drop]).Seconds() {
		drop++
	}
	g.accepted = g.accepted[drop:]
}

// Len is how many accepted arrivals the log still holds.
func (g *Log) Len() int { return len(g.accepted) }
