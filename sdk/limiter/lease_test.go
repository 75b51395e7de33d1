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
			slot, busy := leaseDecision(f, tt.slots, now, 0)
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

// A lease lasts its Hold unless released, but a live push keeps it at
// most its Timeout: a busy answer tells a caller to ask again once every
// push now under a lease has ended, not at the crash bound. With lease_hold
// 15m, max_in_flight 1 and a vendor answering in seconds, the expiry sent
// every contended push of the simulated fleet 15 minutes back (adversary
// case -seed 9 -parts max_in_flight,lifetime,retry-after,slow: days still
// stale after an hour of drain).
func TestLeaseBusyAsksAgainWithinAPushsTime(t *testing.T) {
	const now = int64(100_000_000)
	sec := int64(time.Second / time.Microsecond)
	held := func(exps ...int64) (s [MaxLeases]leaseSlot) {
		for i, e := range exps {
			s[i].exp, s[i].at = e, now
		}
		return s
	}
	tests := []struct {
		name          string
		max           int
		hold, timeout time.Duration
		slots         [MaxLeases]leaseSlot
		wait          time.Duration
	}{
		{"hold 15m, just taken: a push's time", 1, 15 * time.Minute, 21 * time.Second, held(now + 900*sec), 21 * time.Second},
		{"expiry before a push's time: the expiry", 1, 15 * time.Minute, 21 * time.Second, held(now + 5*sec), 5 * time.Second},
		{"all held, the earliest far off: a push's time", 2, 10 * time.Minute, 30 * time.Second, held(now+500*sec, now+200*sec), 30 * time.Second},
		{"above a lowered max: a push's time", 1, 15 * time.Minute, 21 * time.Second, held(0, now+900*sec), 21 * time.Second},
		{"no timeout (= hold): the expiry", 1, time.Minute, 0, held(now + 40*sec), 40 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := InFlight{Key: "k", Max: tt.max, Hold: tt.hold, Timeout: tt.timeout}
			slot, busy := leaseDecision(f, tt.slots, now, 0)
			if busy == nil || busy.RetryAfter != tt.wait {
				t.Fatalf("slot %d, busy %+v; want busy, retry after %v", slot, busy, tt.wait)
			}
		})
	}
}

// A busy answer follows the pushes under the held slots: a slot is likely
// free once its push has taken as long as the last push released (the
// item's p), so a process waiting for a slot that another process frees
// is deferred to about when it frees, not a Timeout later; a slot past
// that (passed on with no write, or a push running long) brings a
// deferred job back after one push's time. A waiter that stays asks again
// as before (Recheck): at the earliest expiry or after a Timeout.
func TestLeaseBusyAsksWhenAPushIsLikelyOver(t *testing.T) {
	const now = int64(100_000_000)
	ms := int64(time.Millisecond / time.Microsecond)
	held := func(ats ...int64) (s [MaxLeases]leaseSlot) {
		for i, a := range ats {
			s[i].exp, s[i].at = a+10_000*ms, a
		}
		return s
	}
	tests := []struct {
		name          string
		max           int
		push          int64
		slots         [MaxLeases]leaseSlot
		wait, recheck time.Duration
	}{
		{"no push released yet: a Timeout", 2, 0, held(now, now-50*ms), 5 * time.Second, 5 * time.Second},
		{"the earliest push's likely end", 2, 200 * ms, held(now-50*ms, now-120*ms), 80 * time.Millisecond, 5 * time.Second},
		{"one past its likely end: the other's", 2, 200 * ms, held(now-900*ms, now-20*ms), 180 * time.Millisecond, 5 * time.Second},
		{"every one past its likely end: one push's time, a waiter's recheck a Timeout", 2, 200 * ms, held(now-900*ms, now-300*ms), 200 * time.Millisecond, 5 * time.Second},
		{"a push's end past the Timeout: the Timeout", 1, 9000 * ms, held(now), 5 * time.Second, 5 * time.Second},
		{"a slot expiring sooner: the expiry", 1, 200 * ms, held(now - 9_950*ms), 50 * time.Millisecond, 50 * time.Millisecond},
		{"above a lowered max: as before, the pushes' ends unread", 1, 200 * ms, held(now, now), 5 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := InFlight{Key: "k", Max: tt.max, Hold: 10 * time.Second, Timeout: 5 * time.Second}
			slot, busy := leaseDecision(f, tt.slots, now, tt.push)
			if busy == nil || busy.RetryAfter != tt.wait || busy.Recheck != tt.recheck {
				t.Fatalf("slot %d, busy %+v; want busy, retry after %v, recheck after %v", slot, busy, tt.wait, tt.recheck)
			}
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

// A waiter leaving with no "no slot" of its process to go by (the last
// answer was a free slot, or a release of the process freed one since) is
// told to ask again at once, not after a push's time, nor the crash bound:
// a waiter whose wait ends asks the store itself when no fresh answer is
// known (askAtEnd), so this is a slot seen free.
func TestLeaseGateWithNoAnswerAsksAgainAtOnce(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	g := NewLeaseGate(&Limiter{now: func() time.Time { return now }})
	for _, f := range []InFlight{
		{Key: "k", Max: 1, Hold: 15 * time.Minute, Timeout: 21 * time.Second},
		{Key: "k", Max: 1, Hold: 25 * time.Second},
	} {
		if got := g.lastBusy(f).RetryAfter; got != 0 {
			t.Errorf("hold %v, timeout %v: retry after %v, want 0", f.Hold, f.Timeout, got)
		}
	}
	g.busyUntil["k"], g.busyAt["k"] = now.Add(300*time.Millisecond), now.Add(-time.Second)
	if got := g.lastBusy(InFlight{Key: "k", Max: 1, Hold: time.Minute}).RetryAfter; got != 300*time.Millisecond {
		t.Errorf("with the store's no until 300ms from now: retry after %v", got)
	}
}
