package dispatch

import (
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// TestDecideHandedBackHoldingASlot: a job a push handed back after the
// call's hold that holds a slot to use (booked as it lingered, its work
// begun for it) uses it or comes back before it, as any job holding one;
// deferred at once, it would come back after its slot and waste it. Only
// a slot past its grace is dropped, and the job deferred unbooked.
func TestDecideHandedBackHoldingASlot(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		slot     time.Duration // from now
		prepared bool
		want     decision
	}{
		{"work begun, slot within PrepLead: sleep to it and push", 200 * time.Millisecond, true,
			decision{Act: actPush, Wait: 200 * time.Millisecond}},
		{"work begun, slot due now: push", 0, true, decision{Act: actPush}},
		{"slot due now, work to begin: begin it, then the slot", 0, false, decision{Act: actPrepare}},
		{"slot within its grace, just passed: push", -time.Second, true, decision{Act: actPush}},
		{"slot beyond the hold: defer to come back a lead before it", 5 * time.Second, true,
			decision{Act: actDefer, Wait: 4 * time.Second, Reason: "waiting for its reserved slot"}},
		{"slot past its grace: dropped (wasted), deferred unbooked", -3 * time.Second, false,
			decision{Act: actDefer, Reason: handedBackLate, Hold: dropped}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := situation{
				Job: job.Job{ID: "j", FirstSeen: t0.Add(-time.Minute), Hold: job.Hold{At: t0.Add(tt.slot), Tokens: 1}},
				Now: t0, MaxAge: time.Hour, Grace: 2 * time.Second,
				Lead: leadRule{Floor: time.Second}, Next: true, Sleep: sleepBound{Hold: t0.Add(-time.Millisecond)},
				Prepares: true, Prepared: tt.prepared, PrepLead: 300 * time.Millisecond,
			}
			p := decide(s)
			if len(p.Steps) != 1 || p.Steps[0] != tt.want {
				t.Fatalf("decide = %+v, want the one step %+v", p.Steps, tt.want)
			}
		})
	}
}
