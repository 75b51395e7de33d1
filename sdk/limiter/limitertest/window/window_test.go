package window

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// at builds arrivals from offsets in milliseconds.
func at(ms ...int) []time.Time {
	ts := make([]time.Time, len(ms))
	for i, m := range ms {
		ts[i] = t0.Add(time.Duration(m) * time.Millisecond)
	}
	return ts
}

func TestFullestOnHandMadeRecordings(t *testing.T) {
	tests := []struct {
		name         string
		limit        Limit
		arrivals     []time.Time
		broken       bool
		wantArrivals int           // in the fullest window
		wantWidth    time.Duration // of the fullest window
	}{
		{"empty", Limit{Rate: 1, Burst: 1}, nil, false, 0, 0},
		{"burst at one instant", Limit{Rate: 1, Burst: 3}, at(0, 0, 0), false, 3, 0},
		{"one over the burst at one instant", Limit{Rate: 1, Burst: 3}, at(0, 0, 0, 0), true, 4, 0},
		{"exact pace after the burst", Limit{Rate: 10, Burst: 2}, at(0, 0, 100, 200, 300), false, 5, 300 * time.Millisecond},
		{"one a microsecond early", Limit{Rate: 10, Burst: 2}, append(at(0, 0, 100), t0.Add(200*time.Millisecond-time.Microsecond)), true, 4, 200*time.Millisecond - time.Microsecond},
		// rate 20/s is 50ms an arrival, which float64 does not hold exactly.
		{"rate 20 burst 40 at pace", Limit{Rate: 20, Burst: 40}, append(at(make([]int, 40)...), at(50, 100, 150, 200)...), false, 44, 200 * time.Millisecond},
		// Only the long window sees it: every short window fits.
		{"the long window binds", Limit{Rate: 1, Burst: 2}, at(0, 0, 1000, 2000, 3000, 3500), true, 6, 3500 * time.Millisecond},
		{"unsorted input", Limit{Rate: 1, Burst: 1}, at(2000, 0, 1000), false, 3, 2 * time.Second},
		{"an idle gap does not bank more than the burst", Limit{Rate: 1, Burst: 2}, at(0, 10000, 10000, 10000), true, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, broken := Fullest(tt.arrivals, tt.limit)
			if broken != tt.broken {
				t.Errorf("broken = %v, want %v (fullest %v)", broken, tt.broken, w)
			}
			if w.Arrivals != tt.wantArrivals || w.Width() != tt.wantWidth {
				t.Errorf("fullest window %v, want %d arrivals over %v", w, tt.wantArrivals, tt.wantWidth)
			}
			if err := Check(tt.arrivals, tt.limit); (err != nil) != tt.broken {
				t.Errorf("Check = %v, want broken %v", err, tt.broken)
			}
			if tt.broken && w.Ratio() <= 1 {
				t.Errorf("a broken recording's fullest window has ratio %v, want > 1", w.Ratio())
			}
		})
	}
}

func TestCheckNamesTheWindow(t *testing.T) {
	err := Check(at(0, 0, 0), Limit{Rate: 1, Burst: 2})
	if err == nil || !strings.Contains(err.Error(), "3 arrivals in 0s") {
		t.Fatalf("Check = %v, want it to name 3 arrivals in 0s", err)
	}
	if err := Check(nil, Limit{Rate: 0, Burst: 1}); err == nil {
		t.Error("a zero rate was accepted")
	}
	if err := Check(nil, Limit{Rate: 1, Burst: 0}); err == nil {
		t.Error("a zero burst was accepted")
	}
}

// Log's verdicts, waits and remaining counts on a hand-made sequence.
func TestLogAdmit(t *testing.T) {
	l := Limit{Rate: 1, Burst: 2} // two at once, then one a second
	type step struct {
		ms        int
		allowed   bool
		wait      time.Duration
		remaining int
	}
	steps := []step{
		{0, true, 0, 1},
		{0, true, 0, 0},
		{0, false, time.Second, 0},
		{999, false, time.Millisecond, 0},
		{1000, true, 0, 0},
		{1500, false, 500 * time.Millisecond, 0},
		{2000, true, 0, 0},
		{10000, true, 0, 1}, // idle: a full bucket again, no more
		{10000, true, 0, 0},
		{10000, false, time.Second, 0},
	}
	var g Log
	for i, s := range steps {
		d := g.Admit(t0.Add(time.Duration(s.ms)*time.Millisecond), l)
		if d.Allowed != s.allowed || d.Wait != s.wait || d.Remaining != s.remaining {
			t.Errorf("step %d at %dms: %+v, want allowed %v wait %v remaining %d", i, s.ms, d, s.allowed, s.wait, s.remaining)
		}
	}
}

// Log, pruned, decides exactly as the exhaustive definition does: an
// arrival is accepted iff the accepted recording plus it breaks no window.
// And what it accepts never breaks the limit.
func TestLogMatchesTheDefinition(t *testing.T) {
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 7))
		l := Limit{Rate: float64(1 + rng.IntN(30)), Burst: 1 + rng.IntN(8)}
		var (
			g        Log
			accepted []time.Time
			now      = t0
		)
		for i := range 200 {
			// Mostly bunched arrivals, now and then an idle gap.
			gap := time.Duration(rng.IntN(int(2 * time.Second / time.Duration(l.Rate))))
			if rng.IntN(20) == 0 {
				gap *= 20
			}
			if rng.IntN(3) == 0 {
				gap = 0
			}
			now = now.Add(gap)
			_, broken := Fullest(append(accepted, now), l)
			d := g.Admit(now, l)
			if d.Allowed == broken {
				t.Fatalf("seed %d arrival %d: Log allowed %v, the definition %v (limit %+v)", seed, i, d.Allowed, !broken, l)
			}
			if d.Allowed {
				accepted = append(accepted, now)
			} else if _, broken := Fullest(append(accepted, now.Add(d.Wait)), l); broken {
				t.Fatalf("seed %d arrival %d: refused with wait %v, but it does not fit then either", seed, i, d.Wait)
			}
		}
		if len(accepted) < l.Burst {
			t.Fatalf("seed %d: only %d accepted", seed, len(accepted))
		}
		if err := Check(accepted, l); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if g.Len() > len(accepted) {
			t.Fatalf("seed %d: log holds %d of %d", seed, g.Len(), len(accepted))
		}
	}
}
