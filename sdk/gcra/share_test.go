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
