package gcra

import (
	"math/rand/v2"
	"testing"
)

func TestDecideMulti(t *testing.T) {
	const now = int64(1_000_000_000)
	fast := PerSecond(10, 10) // T 100ms, τ 1s
	slow := PerSecond(1, 1)   // T 1s, τ 1s
	minute := PerMinute(30, 3)
	tests := []struct {
		name     string
		tats     []int64
		limits   []Limit
		n        int
		maxDelay int64
		allowed  bool
		slot     int64 // after now
		binding  int
		retry    int64
	}{
		{"all idle", []int64{0, 0}, []Limit{fast, slow}, 1, 0, true, 0, 0, 0},
		{"one busy but conforming", []int64{now + 500_000, 0}, []Limit{fast, slow}, 1, 0, true, 0, 0, 0},
		{"slow one denies", []int64{0, now + 1_000_000}, []Limit{fast, slow}, 1, 0, false, 0, 1, 1_000_000},
		{"max of two denials", []int64{now + 1_000_000, now + 1_000_000, 0}, []Limit{fast, slow, fast}, 1, 0, false, 0, 1, 1_000_000},
		{"max of two denials, other order", []int64{now + 1_000_000, now + 3_000_000}, []Limit{slow, fast}, 1, 0, false, 0, 1, 2_100_000},
		{"per-minute window binds", []int64{0, now + 6_000_000}, []Limit{fast, minute}, 1, 0, false, 0, 1, 2_000_000},
		{"reservation: latest slot", []int64{now + 1_000_000, now + 2_000_000}, []Limit{fast, slow}, 1, 5_000_000, true, 2_000_000, 1, 0},
		{"reservation past maxDelay", []int64{0, now + 4_000_000}, []Limit{fast, slow}, 1, 2_000_000, false, 0, 1, 2_000_000},
		{"n tokens", []int64{now + 200_000, 0}, []Limit{fast, PerSecond(1, 2)}, 2, 0, true, 0, 0, 0},
		{"n tokens denied", []int64{now + 900_000, 0}, []Limit{fast, PerSecond(1, 2)}, 2, 0, false, 0, 0, 100_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DecideMulti(tt.tats, now, tt.limits, tt.n, tt.maxDelay)
			if d.Allowed != tt.allowed || d.Binding != tt.binding || d.RetryAfter != tt.retry || (d.Allowed && d.Slot != now+tt.slot) {
				t.Fatalf("DecideMulti = %+v, want allowed %v slot now+%d binding %d retry %d", d, tt.allowed, tt.slot, tt.binding, tt.retry)
			}
		})
	}
}

// Against the single-bucket Decide, for random states: the multi decision
// grants iff every bucket does, its slot is the latest, its retry-after the
// largest; retrying at RetryAfter is granted and 1µs earlier is not; and
// every bucket's own slot under its bound is no later than the common slot.
func TestDecideMultiAgreesWithDecide(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	const now = int64(5_000_000_000)
	for range 20000 {
		k := 1 + rng.IntN(4)
		limits := make([]Limit, k)
		tats := make([]int64, k)
		n := 1 + rng.IntN(3)
		maxDelay := []int64{0, 0, 300_000, 2_000_000}[rng.IntN(4)]
		for i := range limits {
			limits[i] = Limit{Rate: []float64{0.5, 1, 3, 10, 100}[rng.IntN(5)], Burst: n + rng.IntN(5)}
			tats[i] = now - 1_000_000 + rng.Int64N(limits[i].Tolerance()+maxDelay+2_000_000)
		}
		d := DecideMulti(tats, now, limits, n, maxDelay)
		all, slot, retry := true, now, int64(0)
		for i, l := range limits {
			s := Decide(tats[i], now, l, n, maxDelay)
			all = all && s.Allowed
			if s.Allowed {
				slot = max(slot, s.Slot)
			} else {
				retry = max(retry, s.RetryAfter)
			}
		}
		if d.Allowed != all || (all && d.Slot != slot) || (!all && d.RetryAfter != retry) {
			t.Fatalf("tats %v limits %v n %d delay %d: %+v, want allowed %v slot %d retry %d", tats, limits, n, maxDelay, d, all, slot, retry)
		}
		if !d.Allowed {
			if !DecideMulti(tats, now+d.RetryAfter, limits, n, maxDelay).Allowed ||
				DecideMulti(tats, now+d.RetryAfter-1, limits, n, maxDelay).Allowed {
				t.Fatalf("tats %v limits %v: retry-after %d is not exact", tats, limits, d.RetryAfter)
			}
			continue
		}
		for i, l := range limits {
			if d.Bounds[i] < tats[i] {
				t.Fatalf("bound %d below the tat seen %d", d.Bounds[i], tats[i])
			}
			// The worst tat the write may find: its own slot is ≤ Slot.
			if worst := max(d.Bounds[i], now) + int64(n)*l.Interval() - l.Tolerance(); worst > d.Slot {
				t.Fatalf("bucket %d: slot %d under its bound is after the common slot %d", i, worst, d.Slot)
			}
		}
	}
}
