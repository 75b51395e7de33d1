package gcra

import (
	"testing"
	"time"
)

func TestShareLimits(t *testing.T) {
	l := Limit{Rate: 10, Burst: 20, Margin: 100 * time.Millisecond}
	s := Share{Fraction: 0.5, Leases: 5, Epoch: 10 * time.Second, Quiet: time.Minute}
	if err := s.Validate(l); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n         int
		rate      float64
		burst     int
		interval  int64
		tolerance int64
	}{
		{0, 10, 15, 100_000, 1_400_000},
		{1, 9, 15, 111_112, 1_566_680},
		{5, 5, 15, 200_000, 2_900_000},
		{9, 5, 15, 200_000, 2_900_000}, // never more than Leases
	} {
		got := s.SharedLimit(l, tc.n)
		if got.Rate != tc.rate || got.Burst != tc.burst || got.Interval() != tc.interval || got.Tolerance() != tc.tolerance {
			t.Errorf("SharedLimit(%d) = %+v (T %d, τ %d); want rate %v burst %d T %d τ %d",
				tc.n, got, got.Interval(), got.Tolerance(), tc.rate, tc.burst, tc.interval, tc.tolerance)
		}
	}
	if got := s.SharedLimit(Limit{Rate: 10, Burst: 1}, 0).Burst; got != 1 {
		t.Errorf("a burst-one limit's shared burst %d; want 1", got)
	}
}

// A lease starts empty, grants one token a lease interval apart, and none
// from its epoch's end: in [start, end) it grants at most ρ·(end − start).
func TestShareLeaseSpends(t *testing.T) {
	l := Limit{Rate: 10, Burst: 20}
	s := Share{Fraction: 0.5, Leases: 5, Epoch: 10 * time.Second}
	start := int64(3_500_000) // 3.5 s into epoch 0
	lease := s.NewLease(l, start)
	granted := 0
	for now := start; now < 12_000_000; now += 10_000 {
		var ok bool
		if lease, ok = s.Spend(l, lease, now); ok {
			granted++
			if now >= 10_000_000 {
				t.Fatalf("granted at %d µs, after the epoch's end", now)
			}
		}
	}
	if granted != 6 { // 4.5, 5.5, …, 9.5 s
		t.Errorf("a lease of 1/s from 3.5 s to 10 s granted %d; want 6", granted)
	}
}

func TestShareValidate(t *testing.T) {
	l := Limit{Rate: 10, Burst: 20}
	ok := Share{Fraction: 0.5, Leases: 5, Epoch: 10 * time.Second}
	for _, tc := range []struct {
		name string
		edit func(*Share)
	}{
		{"fraction 0", func(s *Share) { s.Fraction = 0 }},
		{"fraction above half", func(s *Share) { s.Fraction = 0.6 }},
		{"no leases", func(s *Share) { s.Leases = 0 }},
		{"leases the whole burst", func(s *Share) { s.Leases = 20 }},
		{"short epoch", func(s *Share) { s.Epoch = time.Millisecond }},
		{"negative quiet", func(s *Share) { s.Quiet = -1 }},
		{"an epoch shorter than a lease's interval", func(s *Share) { s.Fraction, s.Leases, s.Epoch = 0.1, 5, 4*time.Second }},
	} {
		s := ok
		tc.edit(&s)
		if err := s.Validate(l); err == nil {
			t.Errorf("%s: valid; want an error", tc.name)
		}
	}
	if got := ok.EpochOf(-1); got != -1 {
		t.Errorf("EpochOf(-1) = %d; want -1", got)
	}
}

// A lease of burst β starts empty, banks one token a lease interval up to
// β, and grants none from its epoch's end: a clump of β requests after an
// idle spell is granted whole, and in any window w its grants number at
// most β + ρ·w (ρ·w in a window from its start), the bound's leased term.
func TestShareLeaseBanksItsBurst(t *testing.T) {
	l := Limit{Rate: 10, Burst: 20}
	const sec = int64(1_000_000)
	start := 3*sec + sec/2 // 3.5 s into epoch 0; ρ = 1/s
	tests := []struct {
		burst int
		asks  []int64 // µs after start: one request each
		want  []bool
	}{
		// Empty at its start, one token at 1 s, two banked at 2 s.
		{2, []int64{0, sec - 1, sec}, []bool{false, false, true}},
		{2, []int64{2 * sec, 2 * sec, 2 * sec}, []bool{true, true, false}},
		{2, []int64{5 * sec, 5 * sec, 5*sec + sec/2, 6 * sec}, []bool{true, true, false, true}},
		{1, []int64{2 * sec, 2 * sec}, []bool{true, false}},
		{3, []int64{6 * sec, 6 * sec, 6 * sec, 6 * sec}, []bool{true, true, true, false}},
		// Nothing at or after the epoch's end, however much is banked.
		{2, []int64{10*sec - start, 10*sec - start}, []bool{false, false}},
	}
	for _, tc := range tests {
		s := Share{Fraction: 0.5, Leases: 5, Burst: tc.burst, Epoch: 10 * time.Second}
		if err := s.Validate(l); err != nil {
			t.Fatalf("β %d: %v", tc.burst, err)
		}
		lease := s.NewLease(l, start)
		for i, at := range tc.asks {
			var ok bool
			if lease, ok = s.Spend(l, lease, start+at); ok != tc.want[i] {
				t.Errorf("β %d, asks %v: request %d at +%v granted %v, want %v", tc.burst, tc.asks, i, time.Duration(at)*time.Microsecond, ok, tc.want[i])
			}
		}
	}
	// Asked every 10 ms, every window of the grants holds β + ρ·w, and
	// one from the lease's start ρ·w.
	for _, beta := range []int{1, 2, 4} {
		s := Share{Fraction: 0.5, Leases: 4, Burst: beta, Epoch: 10 * time.Second}
		rho := s.LeaseRate(l)
		lease := s.NewLease(l, start)
		var grants []int64
		for now := start; now < 12*sec; now += 10_000 {
			if now%(3*sec) < sec {
				continue // an idle spell: the pacer banks
			}
			var ok bool
			if lease, ok = s.Spend(l, lease, now); ok {
				grants = append(grants, now)
			}
		}
		for i := range grants {
			for j := i; j < len(grants); j++ {
				w := float64(grants[j]-grants[i]) / 1e6
				if n := float64(j - i + 1); n > float64(beta)+rho*w+1e-9 {
					t.Fatalf("β %d: %v grants within %.2f s from %d µs; want at most β + ρ·w = %.2f", beta, n, w, grants[i], float64(beta)+rho*w)
				}
			}
			if w := float64(grants[i]-start) / 1e6; float64(i+1) > rho*w+1e-9 {
				t.Fatalf("β %d: %d grants %.2f s after the lease's start; want at most ρ·w = %.2f", beta, i+1, w, rho*w)
			}
		}
	}
	if err := (Share{Fraction: 0.5, Leases: 5, Burst: 4, Epoch: 10 * time.Second}).Validate(l); err == nil {
		t.Error("5 leases banking 4 tokens each on a burst of 20: valid; want an error (their tokens come out of the burst)")
	}
	if got := (Share{Fraction: 0.5, Leases: 5, Burst: 3, Epoch: 10 * time.Second}).SharedLimit(l, 0).Burst; got != 5 {
		t.Errorf("the shared burst beside 5 leases banking 3: %d; want 20 − 15 = 5", got)
	}
}
