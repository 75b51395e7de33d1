package fallback

import (
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

func TestShareDividesRateAndBurst(t *testing.T) {
	p := New(4)
	r, b := p.Share(limiter.Limit{Rate: 10, Burst: 8})
	if r != 2.5 || b != 2 {
		t.Fatalf("share of 10/s burst 8 over 4: %v/s burst %d, want 2.5/s burst 2", r, b)
	}
	if _, b := p.Share(limiter.Limit{Rate: 10, Burst: 3}); b != 1 {
		t.Fatalf("burst 3 over 4: %d, want 1 (at least one token)", b)
	}
}

// One process's share starts empty, fills to burst÷N at rate÷N, and
// admits no more.
func TestReservePacesAtTheShare(t *testing.T) {
	p := New(2)
	b := []limiter.Bucket{{Key: "k", Limit: limiter.Limit{Rate: 4, Burst: 4}}} // share: 2/s, burst 2
	now := time.Unix(1000, 0)
	if d, ok := p.Reserve(b, now, 0); ok || d != 500*time.Millisecond {
		t.Fatalf("a new share: delay %v ok %v, want empty (first token in 500ms)", d, ok)
	}
	now = now.Add(time.Second) // refilled to its burst
	granted := 0
	for i := 0; i < 10; i++ {
		if _, ok := p.Reserve(b, now, 0); ok {
			granted++
		}
	}
	if granted != 2 {
		t.Fatalf("granted %d at once, want the share's burst 2", granted)
	}
	delay, ok := p.Reserve(b, now, 0)
	if ok || delay != 500*time.Millisecond {
		t.Fatalf("empty share: delay %v ok %v, want 500ms and refused", delay, ok)
	}
	if d, ok := p.Reserve(b, now.Add(500*time.Millisecond), 0); !ok || d != 0 {
		t.Fatalf("after 1/(2/s): delay %v ok %v, want a token now", d, ok)
	}
	// Over 10.5 s, the burst of 2 and 2/s × 10.5 s: 23 in all.
	for ms := 501; ms <= 10_500; ms++ {
		if _, ok := p.Reserve(b, now.Add(time.Duration(ms)*time.Millisecond), 0); ok {
			granted++
		}
	}
	if granted+1 != 2+21 {
		t.Fatalf("granted %d over 10.5 s, want 23", granted+1)
	}
}

// Every bucket of a route must have a token; a refusal takes none.
func TestReserveAllOrNothing(t *testing.T) {
	p := New(1)
	a := limiter.Bucket{Key: "a", Limit: limiter.Limit{Rate: 5, Burst: 5}}
	c := limiter.Bucket{Key: "c", Limit: limiter.Limit{Rate: 1, Burst: 1}}
	now := time.Unix(1000, 0)
	p.Reserve([]limiter.Bucket{a}, now, 0) // both start empty
	p.Reserve([]limiter.Bucket{c}, now, 0)
	now = now.Add(time.Second) // a holds 5, c 1
	if _, ok := p.Reserve([]limiter.Bucket{a, c}, now, 0); !ok {
		t.Fatal("first reservation refused")
	}
	if _, ok := p.Reserve([]limiter.Bucket{a, c}, now, 0); ok {
		t.Fatal("second reservation granted past c's burst")
	}
	for i := 0; i < 4; i++ {
		if _, ok := p.Reserve([]limiter.Bucket{a}, now, 0); !ok {
			t.Fatalf("a's token %d of 4 left was taken by the refused reservation", i+1)
		}
	}
}

// A grant of the shared bucket empties the share: the next outage opens
// with no local burst.
func TestDrainEmptiesTheShare(t *testing.T) {
	p := New(1)
	b := []limiter.Bucket{{Key: "k", Limit: limiter.Limit{Rate: 2, Burst: 2}}}
	now := time.Unix(1000, 0)
	p.Reserve(b, now, time.Second)
	later := now.Add(time.Hour) // refilled to its burst of 2
	for i := 0; i < 3; i++ {
		p.Drain(b, later) // repeated drains do not push the share into debt
	}
	if _, ok := p.Reserve(b, later, 0); ok {
		t.Fatal("a drained share granted a token")
	}
	if d, ok := p.Reserve(b, later.Add(500*time.Millisecond), 0); !ok || d != 0 {
		t.Fatalf("500ms after the drain: delay %v ok %v, want a token", d, ok)
	}
	p.Drain([]limiter.Bucket{{Key: "other", Limit: limiter.Limit{Rate: 1, Burst: 1}}}, later)
	if len(p.buckets) != 1 {
		t.Fatalf("Drain created shares: %d, want 1", len(p.buckets))
	}
}

// Local grants are pending until a drain: what the shared bucket must
// book when it comes back.
func TestPendingCountsLocalGrantsUntilDrain(t *testing.T) {
	p := New(1)
	b := limiter.Bucket{Key: "k", Limit: limiter.Limit{Rate: 10, Burst: 10}}
	now := time.Unix(1000, 0)
	granted := 0
	for ms := 0; ms < 1000; ms += 50 {
		if _, ok := p.Reserve([]limiter.Bucket{b}, now.Add(time.Duration(ms)*time.Millisecond), 0); ok {
			granted++
		}
	}
	if got := p.Pending(b); got != granted || granted == 0 {
		t.Fatalf("Pending = %d after %d local grants", got, granted)
	}
	p.Drain([]limiter.Bucket{b}, now.Add(time.Second))
	if got := p.Pending(b); got != 0 {
		t.Fatalf("Pending after Drain = %d, want 0", got)
	}
}
