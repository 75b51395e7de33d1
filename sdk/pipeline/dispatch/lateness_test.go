package dispatch

import (
	"context"
	"testing"
	"time"
)

// A deferred job comes back early by the lateness the queue showed, in
// proportion to its wait, and keeps its slot.
func TestDeferralLeadFollowsObservedLateness(t *testing.T) {
	r := newRig(t)
	now := r.clock.Now()
	// It was deferred for 20 s and came back 2 s late: 10% of the delay.
	j := testJob(now)
	j.DeferredAt, j.Due = now.Add(-22*time.Second), now.Add(-2*time.Second)
	j.Hold.At = now.Add(40 * time.Second)
	res, err := r.d.HandleJob(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	if res.Lateness != 2*time.Second || res.Delayed != 20*time.Second {
		t.Fatalf("lateness %v of %v, want 2s of 20s", res.Lateness, res.Delayed)
	}
	// 1.25 × 10% of 40 s = 5 s early, more than the BlockThreshold.
	if len(r.queue.deferred) != 1 || r.queue.deferred[0].wait != 35*time.Second || !r.queue.deferred[0].j.Hold.At.Equal(j.Hold.At) {
		t.Fatalf("deferred %+v, want 35 s with the slot kept", r.queue.deferred)
	}
}

// A deferred job delivered late on a short delay (workers busy) teaches
// the lead that lateness, whatever the delay: the next deferral to a held
// slot comes back that much early, not by the BlockThreshold alone.
func TestDeferralLeadFollowsBusyWorkers(t *testing.T) {
	r := newRig(t)
	now := r.clock.Now()
	// Deferred for 1 s, it came back 1.2 s late; its slot is 3 s off.
	j := testJob(now)
	j.DeferredAt, j.Due = now.Add(-2200*time.Millisecond), now.Add(-1200*time.Millisecond)
	j.Hold.At = now.Add(3 * time.Second)
	if _, err := r.d.HandleJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	// 1.25 × 1.2 s = 1.5 s early: 1.5 s goes as the whole second that
	// keeps it. By the 1 s BlockThreshold alone it went as 2 s, and a
	// delivery as late again missed the slot.
	var waits []time.Duration
	for _, d := range r.queue.deferred {
		waits = append(waits, d.wait)
	}
	if len(waits) != 1 || waits[0] != time.Second || !r.queue.deferred[0].j.Hold.At.Equal(j.Hold.At) {
		t.Fatalf("deferred for %v, want 1 s with the slot kept", waits)
	}
}

// The lead learns the queue's lateness as a share of long delays, and the
// busy workers' as a time from short ones (adversary seed 42: deferrals of
// 1 s delivered 1–5 s late by a deferred queue whose workers were busy,
// each past a slot a 1 s lead kept, 1,725 slots wasted in one run), at
// most the call's hold (2 s here).
func TestLatenessLead(t *testing.T) {
	tests := []struct {
		name  string
		seen  [][2]time.Duration // (late, delayed)
		wait  time.Duration
		floor float64
		want  time.Duration
	}{
		{"nothing seen: the floor", nil, 30 * time.Second, 0.1, 3 * time.Second},
		{"6% late on 30 s waits", [][2]time.Duration{{1800 * time.Millisecond, 30 * time.Second}}, 60 * time.Second, 0.05, 4500 * time.Millisecond},
		{"early arrivals teach nothing", [][2]time.Duration{{-time.Second, 10 * time.Second}}, 10 * time.Second, 0.1, time.Second},
		{"short delays teach no share", [][2]time.Duration{{400 * time.Millisecond, 2 * time.Second}}, 30 * time.Second, 0.1, 3 * time.Second},
		{"a short delay late by busy workers: the lead covers that lateness", [][2]time.Duration{{1200 * time.Millisecond, time.Second}}, 3 * time.Second, 0.1, 1500 * time.Millisecond},
		{"busy workers' lateness, decaying", [][2]time.Duration{{1200 * time.Millisecond, time.Second}, {0, time.Second}}, 3 * time.Second, 0.1, 1470 * time.Millisecond},
		{"busy workers' lateness past the call's hold: at most the hold", [][2]time.Duration{{5 * time.Second, 0}}, 4 * time.Second, 0.1, 2 * time.Second},
		{"a wild lateness is capped", [][2]time.Duration{{60 * time.Second, 10 * time.Second}}, 10 * time.Second, 0, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l lateness
			for _, s := range tt.seen {
				l.observe(s[0], s[1])
			}
			if got := l.rule(time.Second, tt.floor, 2*time.Second).lead(tt.wait); got != tt.want {
				t.Fatalf("lead(%v) = %v, want %v", tt.wait, got, tt.want)
			}
		})
	}
}
