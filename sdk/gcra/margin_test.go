package gcra

import (
	"errors"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func TestMarginTolerance(t *testing.T) {
	tests := []struct {
		name     string
		limit    Limit
		tau      int64 // µs
		capacity int
	}{
		{"none", Limit{Rate: 20, Burst: 40}, 2_000_000, 40},
		{"two tokens", Limit{Rate: 20, Burst: 40, Margin: 100 * time.Millisecond}, 1_900_000, 38},
		{"a token and a half keeps the half too", Limit{Rate: 20, Burst: 40, Margin: 75 * time.Millisecond}, 1_925_000, 38},
		{"below a microsecond is nothing", Limit{Rate: 20, Burst: 40, Margin: 500 * time.Nanosecond}, 2_000_000, 40},
		{"never below one token", Limit{Rate: 20, Burst: 40, Margin: 10 * time.Second}, 50_000, 1},
		{"burst one keeps its token", Limit{Rate: 20, Burst: 1, Margin: 30 * time.Millisecond}, 50_000, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.limit.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if got := tt.limit.Tolerance(); got != tt.tau {
				t.Errorf("Tolerance() = %dµs, want %dµs", got, tt.tau)
			}
			if got := tt.limit.Capacity(); got != tt.capacity {
				t.Errorf("Capacity() = %d, want %d", got, tt.capacity)
			}
			if got := Remaining(0, 1_000_000, tt.limit); got != tt.capacity {
				t.Errorf("Remaining(idle) = %d, want the capacity %d", got, tt.capacity)
			}
		})
	}
}

func TestMarginValidate(t *testing.T) {
	for _, m := range []time.Duration{-time.Microsecond, 200 * 365 * 24 * time.Hour} {
		err := Limit{Rate: 20, Burst: 40, Margin: m}.Validate()
		var ae *ArgumentError
		if !errors.As(err, &ae) || ae.Field != "limit.margin" {
			t.Errorf("Validate(margin %v) = %v, want an *ArgumentError on limit.margin", m, err)
		}
	}
}

// TestMarginIdleBucket: a full bucket with a margin grants burst − rate·m
// tokens at once and no more, and the full burst a margin later: the margin
// costs burst, never rate.
func TestMarginIdleBucket(t *testing.T) {
	l := Limit{Rate: 20, Burst: 40, Margin: 100 * time.Millisecond}
	const now = 10_000_000
	if d := Decide(0, now, l, 38, 0); !d.Allowed || d.Slot != now || d.Remaining != 0 {
		t.Fatalf("38 tokens of an idle bucket: %+v, want granted at now with 0 left", d)
	}
	if err := Check(l, 39, 0); !errors.Is(err, ErrNeverGrantable) {
		t.Fatalf("Check(39 tokens, no delay) = %v, want ErrNeverGrantable (capacity 38)", err)
	}
	d := Decide(0, now, l, 40, 100_000)
	if !d.Allowed || d.Slot != now+100_000 {
		t.Fatalf("40 tokens within 100ms: %+v, want granted at now+100ms (the margin)", d)
	}
	// Long run: 38 now, then one per interval; 10 s later the bucket has
	// granted 38 + 200 tokens, exactly what it would without a margin less
	// the 2 tokens of burst.
	tat, granted := int64(0), 0
	for at := int64(now); at <= now+10_000_000; at += 1000 {
		for {
			d := Decide(tat, at, l, 1, 0)
			if !d.Allowed {
				break
			}
			tat, granted = d.TAT, granted+1
		}
	}
	if granted != 38+200 {
		t.Fatalf("granted %d in 10 s, want 238 (burst 40 − 2 of margin + 20/s × 10 s)", granted)
	}
}

// TestMarginArrivalWindows is the claim of the margin: grants whose
// requests reach the vendor up to J after their slot, in any order, never
// put more than burst + rate·W arrivals in a vendor's window of W when the
// bucket keeps a margin of J; without it they can. The oracle counts
// arrivals with the vendor's own float bound, not with this package.
func TestMarginArrivalWindows(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewPCG(seed, seed*13))
		rate, burst := 5+r.Float64()*45, 2+r.IntN(40)
		jitter := time.Duration(1+r.Int64N(int64(burst)*int64(time.Second)/int64(rate)/2)) / time.Microsecond * time.Microsecond
		l := Limit{Rate: rate, Burst: burst, Margin: jitter}
		arrivals := fleetArrivals(r, l, jitter)
		if over, i, j := fullest(arrivals, rate, burst); over > 0 {
			t.Fatalf("seed %d (rate %.2f burst %d margin %v): %d arrivals in [%d, %d]µs, over burst + rate·W by %.3f",
				seed, rate, burst, jitter, j-i+1, arrivals[i], arrivals[j], over)
		}
	}
	// Without a margin: the burst granted at once arrives J late, on top of
	// the first token after it, which is on time.
	l := Limit{Rate: 20, Burst: 40}
	var arrivals []int64
	tat := int64(0)
	const now, J = 1_000_000, 50_000
	for i := range 41 {
		at := int64(now)
		if i == 40 {
			at = now + J
		}
		d := Decide(tat, at, l, 1, J)
		if !d.Allowed {
			t.Fatalf("token %d denied", i)
		}
		tat = d.TAT
		late := int64(0)
		if d.Slot == now {
			late = J
		}
		arrivals = append(arrivals, d.Slot+late)
	}
	sort.Slice(arrivals, func(i, j int) bool { return arrivals[i] < arrivals[j] })
	if over, _, _ := fullest(arrivals, 20, 40); over <= 0 {
		t.Fatalf("without a margin the late burst did not exceed burst + rate·W (%v): the contrast is lost", arrivals)
	}
}

// fleetArrivals grants a random fleet's requests (takes and reservations,
// one to a few tokens) and returns when each token reaches the vendor: its
// slot plus a random delay in [0, J], sorted.
func fleetArrivals(r *rand.Rand, l Limit, J time.Duration) []int64 {
	var tat, now int64 = 0, 1_000_000
	var arrivals []int64
	for range 600 {
		now += r.Int64N(2 * l.Interval())
		n := 1 + r.IntN(max(l.Capacity()/4, 1))
		var maxDelay int64
		if r.IntN(2) == 0 {
			maxDelay = r.Int64N(5 * l.Interval())
		}
		if Check(l, n, maxDelay) != nil {
			continue
		}
		d := Decide(tat, now, l, n, maxDelay)
		if !d.Allowed {
			continue
		}
		tat = d.TAT
		for range n {
			arrivals = append(arrivals, d.Slot+r.Int64N(J.Microseconds()+1))
		}
	}
	sort.Slice(arrivals, func(i, j int) bool { return arrivals[i] < arrivals[j] })
	return arrivals
}

// fullest returns by how much the fullest window of sorted arrivals (µs)
// exceeds burst + rate·W, and its ends; ≤ 0 when none does.
func fullest(arrivals []int64, rate float64, burst int) (over float64, from, to int) {
	over = -1
	for i := range arrivals {
		for j := i; j < len(arrivals); j++ {
			w := float64(arrivals[j]-arrivals[i]) / 1e6
			if o := float64(j-i+1) - (float64(burst) + rate*w); o > over {
				over, from, to = o, i, j
			}
		}
	}
	return over, from, to
}
