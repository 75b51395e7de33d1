package gcra

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

func TestLimitValidate(t *testing.T) {
	tests := []struct {
		name  string
		limit Limit
		want  string // substring of the error; "" for valid
	}{
		{"ok", Limit{Rate: 20, Burst: 40}, ""},
		{"slow", PerMinute(1, 1), ""},
		{"zero rate", Limit{Rate: 0, Burst: 1}, "limit.rate: 0"},
		{"negative rate", Limit{Rate: -1, Burst: 1}, "limit.rate: -1"},
		{"NaN rate", Limit{Rate: math.NaN(), Burst: 1}, "limit.rate: NaN"},
		{"Inf rate", Limit{Rate: math.Inf(1), Burst: 1}, "limit.rate: +Inf"},
		{"too fast", Limit{Rate: 2e6, Burst: 1}, "at most"},
		{"zero burst", Limit{Rate: 1, Burst: 0}, "limit.burst: 0"},
		{"huge span", Limit{Rate: 1e-9, Burst: 1 << 20}, "100 years"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.limit.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want ErrInvalidArgument mentioning %q", err, tt.want)
			}
		})
	}
}

func TestIntervalRoundsUp(t *testing.T) {
	tests := []struct {
		rate float64
		want int64
	}{
		{20, 50_000},
		{3, 333_334}, // 333333.33… rounded up: a truncated T would run the bucket fast
		{1e6, 1},
		{1.0 / 60, 60_000_000},
	}
	for _, tt := range tests {
		if got := (Limit{Rate: tt.rate, Burst: 1}).Interval(); got != tt.want {
			t.Errorf("Interval(rate %v) = %d, want %d", tt.rate, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	l := Limit{Rate: 10, Burst: 5} // T = 100ms
	tests := []struct {
		name     string
		n        int
		maxDelay int64
		never    bool
		bad      bool
	}{
		{"one", 1, 0, false, false},
		{"burst", 5, 0, false, false},
		{"over burst", 6, 0, true, false},
		{"over burst within delay", 6, 100_000, false, false},
		{"over burst past delay", 7, 199_999, true, false},
		{"zero n", 0, 0, false, true},
		{"negative delay", 1, -1, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(l, tt.n, tt.maxDelay)
			switch {
			case tt.never && !errors.Is(err, ErrNeverGrantable):
				t.Fatalf("Check = %v, want ErrNeverGrantable", err)
			case tt.bad && (err == nil || errors.Is(err, ErrNeverGrantable)):
				t.Fatalf("Check = %v, want an argument error", err)
			case !tt.never && !tt.bad && err != nil:
				t.Fatalf("Check = %v, want nil", err)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	l := Limit{Rate: 10, Burst: 2} // T = 100_000µs, τ = 200_000µs
	const now = 1_000_000_000
	tests := []struct {
		name     string
		tat      int64
		n        int
		maxDelay int64
		want     Decision
	}{
		{"new bucket", 0, 1, 0, Decision{Allowed: true, TAT: now + 100_000, Slot: now, Remaining: 1}},
		{"idle bucket takes burst", now - 5, 2, 0, Decision{Allowed: true, TAT: now + 200_000, Slot: now, Remaining: 0}},
		{"busy bucket last token", now + 100_000, 1, 0, Decision{Allowed: true, TAT: now + 200_000, Slot: now, Remaining: 0}},
		{"empty bucket denies", now + 200_000, 1, 0, Decision{TAT: now + 200_000, RetryAfter: 100_000}},
		{"partly refilled denies two", now + 150_000, 2, 0, Decision{TAT: now + 150_000, RetryAfter: 150_000}},
		{"reservation in the future", now + 200_000, 1, 100_000, Decision{Allowed: true, TAT: now + 300_000, Slot: now + 100_000}},
		{"reservation past maxDelay", now + 300_000, 1, 100_000, Decision{TAT: now + 300_000, RetryAfter: 100_000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.tat, now, l, tt.n, tt.maxDelay); got != tt.want {
				t.Fatalf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPenalty(t *testing.T) {
	l := Limit{Rate: 10, Burst: 4}
	const until = 5_000_000
	tat := Penalty(until, l)
	for _, tc := range []struct {
		at   int64
		want int
	}{{until - 1, 0}, {until, 0}, {until + 100_000, 1}, {until + 250_000, 2}, {until + 400_000, 4}} {
		if got := Remaining(tat, tc.at, l); got != tc.want {
			t.Errorf("Remaining at until%+dµs = %d, want %d (gradual refill)", tc.at-until, got, tc.want)
		}
	}
}

// grant is a token batch granted at a slot, for the window invariant.
type grant struct {
	slot int64
	n    int
}

// checkWindows asserts that in every window [a, b] of slot times the tokens
// granted are at most burst + rate·(b−a), the fleet invariant, by package
// window: the mock OTA's check, which shares no code with this package (not
// even Interval's rounding), so a bug here fails on one side.
func checkWindows(t *testing.T, l Limit, grants []grant) {
	t.Helper()
	var arrivals []time.Time // a batch of n tokens is n arrivals at its slot
	for _, g := range grants {
		for range g.n {
			arrivals = append(arrivals, time.UnixMicro(g.slot))
		}
	}
	if w, broken := window.Fullest(arrivals, window.Limit{Rate: l.Rate, Burst: l.Burst}); broken {
		t.Fatalf("tokens granted over burst %d + rate %v × window: %v", l.Burst, l.Rate, w)
	}
}

// TestWindowInvariantRandom drives one shared tat with random arrivals from a
// fleet whose requests mix takes and reservations, and checks the invariant
// over every window, plus the exactness of every retry-after.
func TestWindowInvariantRandom(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		r := rand.New(rand.NewPCG(seed, seed*7))
		l := Limit{Rate: 1 + r.Float64()*50, Burst: 1 + r.IntN(20)}
		var tat, now int64 = 0, 1_000_000
		var grants []grant
		for range 400 {
			now += r.Int64N(2 * l.Interval())
			n := 1 + r.IntN(l.Burst)
			var maxDelay int64
			if r.IntN(3) == 0 {
				maxDelay = r.Int64N(10 * l.Interval())
			}
			if Check(l, n, maxDelay) != nil {
				continue
			}
			d := Decide(tat, now, l, n, maxDelay)
			if !d.Allowed {
				assertExactRetry(t, tat, now, l, n, maxDelay, d.RetryAfter)
				continue
			}
			if d.Slot < now || d.Slot > now+maxDelay {
				t.Fatalf("slot %d outside [now %d, now+maxDelay %d]", d.Slot, now, now+maxDelay)
			}
			tat = d.TAT
			grants = append(grants, grant{d.Slot, n})
		}
		checkWindows(t, l, grants)
	}
}

func assertExactRetry(t *testing.T, tat, now int64, l Limit, n int, maxDelay, retry int64) {
	t.Helper()
	if retry <= 0 {
		t.Fatalf("denied with retry-after %d", retry)
	}
	if !Decide(tat, now+retry, l, n, maxDelay).Allowed {
		t.Fatalf("denied at now+retryAfter (tat %d now %d n %d retry %d)", tat, now, n, retry)
	}
	if Decide(tat, now+retry-1, l, n, maxDelay).Allowed {
		t.Fatalf("granted 1µs before now+retryAfter (tat %d now %d n %d retry %d)", tat, now, n, retry)
	}
}

func FuzzDecide(f *testing.F) {
	f.Add(int64(0), int64(1_000_000), 20.0, 40, 1, int64(0))
	f.Add(int64(3_000_000), int64(1_000_000), 3.0, 2, 2, int64(500_000))
	f.Fuzz(func(t *testing.T, tat, now int64, rate float64, burst, n int, maxDelay int64) {
		l := Limit{Rate: rate, Burst: burst}
		const horizon = int64(1) << 52
		if now < 0 || now > horizon || tat < 0 || tat > horizon || Check(l, n, maxDelay) != nil {
			return
		}
		d := Decide(tat, now, l, n, maxDelay)
		if !d.Allowed {
			assertExactRetry(t, tat, now, l, n, maxDelay, d.RetryAfter)
			return
		}
		if d.TAT-d.Slot > l.Tolerance() || d.TAT <= tat || d.Slot < now || d.Slot > now+maxDelay {
			t.Fatalf("grant breaks bounds: %+v (tat %d now %d)", d, tat, now)
		}
		if d.Remaining < 0 || d.Remaining > l.Burst {
			t.Fatalf("remaining %d outside [0, %d]", d.Remaining, l.Burst)
		}
	})
}

func TestFitAndSlots(t *testing.T) {
	l := Limit{Rate: 10, Burst: 5} // T = 100ms, τ = 500ms
	const now = 10_000_000
	tests := []struct {
		name     string
		tat      int64
		n        int
		maxDelay int64
		want     int
	}{
		{"idle bucket, burst only", 0, 20, 0, 5},
		{"idle bucket, burst plus a second", 0, 20, 1_000_000, 15},
		{"idle bucket, all fit", 0, 8, 1_000_000, 8},
		{"busy bucket", now + 300_000, 20, 1_000_000, 12},
		{"booked past maxDelay", now + 2_000_000, 5, 1_000_000, 0},
		{"exactly one fits", now + 1_400_000, 5, 1_000_000, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := Fit(tt.tat, now, l, tt.n, tt.maxDelay)
			if k != tt.want {
				t.Fatalf("Fit = %d, want %d", k, tt.want)
			}
			if k == 0 {
				return
			}
			// Booking k one at a time gives the same tat and the same slots.
			tat, singles := tt.tat, []int64{}
			for range k {
				d := Decide(tat, now, l, 1, tt.maxDelay)
				if !d.Allowed {
					t.Fatalf("single reservations run out before %d", k)
				}
				tat, singles = d.TAT, append(singles, d.Slot)
			}
			if Decide(tat, now, l, 1, tt.maxDelay).Allowed && k < tt.n {
				t.Fatalf("Fit = %d but one more single reservation fits", k)
			}
			batchTAT := max(tt.tat, now) + int64(k)*l.Interval()
			if batchTAT != tat {
				t.Fatalf("batch tat %d, singles %d", batchTAT, tat)
			}
			got := Slots(batchTAT, now, l, k)
			for i := range got {
				if got[i] != singles[i] {
					t.Fatalf("slot %d: batch %d, single %d", i, got[i], singles[i])
				}
			}
		})
	}
}
