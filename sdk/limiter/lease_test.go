package limiter

import (
	"errors"
	"testing"
	"time"
)

func TestLeaseDecisionFromTheItem(t *testing.T) {
	const now = int64(100_000_000)
	sec := int64(time.Second / time.Microsecond)
	held := func(exps ...int64) (s [MaxLeases]leaseSlot) {
		for i, e := range exps {
			s[i].exp = e
		}
		return s
	}
	tests := []struct {
		name  string
		max   int
		slots [MaxLeases]leaseSlot
		free  []int // any of these; nil: busy
		wait  time.Duration
		held  int
	}{
		{"empty item: any slot below max", 3, held(), []int{0, 1, 2}, 0, 0},
		{"one free slot", 3, held(now+sec, 0, now+2*sec), []int{1}, 0, 0},
		{"an expired slot is free", 3, held(now+sec, now, now+2*sec), []int{1}, 0, 0},
		{"all held: wait for the earliest", 3, held(now+3*sec, now+sec, now+2*sec), nil, time.Second, 3},
		{"a slot above max blocks until it expires", 2, held(0, now+sec, now+5*sec), nil, 5 * time.Second, 2},
		{"above max, all low held: the later of both", 2, held(now+2*sec, now+sec, now+sec/2), nil, time.Second, 3},
		{"expired above max is no block", 2, held(0, now+sec, now-1), []int{0}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := InFlight{Key: "k", Max: tt.max, Hold: time.Minute}
			slot, busy := leaseDecision(f, tt.slots, now)
			if tt.free == nil {
				if busy == nil || busy.RetryAfter != tt.wait || busy.Held != tt.held {
					t.Fatalf("slot %d, busy %+v; want busy after %v with %d held", slot, busy, tt.wait, tt.held)
				}
				if !errors.Is(busy, ErrExhausted) {
					t.Errorf("%v does not match ErrExhausted", busy)
				}
				return
			}
			if busy != nil {
				t.Fatalf("busy %+v, want one of slots %v", busy, tt.free)
			}
			for _, s := range tt.free {
				if s == slot {
					return
				}
			}
			t.Errorf("slot %d, want one of %v", slot, tt.free)
		})
	}
}

func TestInFlightValidate(t *testing.T) {
	tests := []struct {
		f     InFlight
		field string
	}{
		{InFlight{Key: "k", Max: 3, Hold: time.Second}, ""},
		{InFlight{Key: "k", Max: 3, Hold: 2 * time.Second, Timeout: time.Second}, ""},
		{InFlight{Key: "", Max: 3, Hold: time.Second}, "bucket.key"},
		{InFlight{Key: "k", Max: 0, Hold: time.Second}, "max_in_flight"},
		{InFlight{Key: "k", Max: MaxLeases + 1, Hold: time.Second}, "max_in_flight"},
		{InFlight{Key: "k", Max: 1, Hold: 0}, "hold"},
		{InFlight{Key: "k", Max: 1, Hold: MaxLeaseHold + time.Second}, "hold"},
		{InFlight{Key: "k", Max: 1, Hold: time.Second, Timeout: 2 * time.Second}, "timeout"},
		{InFlight{Key: "k", Max: 1, Hold: time.Second, Timeout: -1}, "timeout"},
	}
	for _, tt := range tests {
		err := tt.f.Validate()
		var ae *ArgumentError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tt.f, err)
		case tt.field != "" && (!errors.As(err, &ae) || ae.Field != tt.field):
			t.Errorf("%+v: %v, want an *ArgumentError on %q", tt.f, err, tt.field)
		}
	}
}

func TestLeaseDeadlineIsWithinTheLease(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := Lease{Expires: now.Add(5 * time.Second)}
	for _, tt := range []struct {
		timeout time.Duration
		want    time.Time
	}{
		{2 * time.Second, now.Add(2 * time.Second)},
		{5 * time.Second, now.Add(5 * time.Second)},
		{9 * time.Second, l.Expires},
		{0, l.Expires},
	} {
		if got := l.Deadline(now, tt.timeout); !got.Equal(tt.want) {
			t.Errorf("Deadline(now, %v) = %v, want %v", tt.timeout, got, tt.want)
		}
	}
}
