package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A job deferred with a slot in hand because its store cannot be read
// (its work's, its route's) gives the slot up (decision.Hold, act):
// the slot passes while the job waits, and the job books another when it
// is back rather than push on one long gone.
func TestAJobDeferredForItsStoreGivesUpItsSlot(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *rig, tk *Task)
	}{
		{"its work unreadable", func(r *rig, _ *Task) { r.work.beginErr = errors.New("dynamodb down") }},
		{"its route unavailable", func(_ *rig, tk *Task) {
			tk.Err = &RouteUnavailableError{Route: tk.Route, Err: errors.New("secrets store down")}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			j := testJob(r.clock.Now())
			j.Hold = job.Hold{At: r.clock.Now(), Key: "k", Tokens: 1}
			tk := r.d.task(j)
			tt.setup(r, &tk)
			res, err := r.d.Do(context.Background(), tk, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != Deferred || len(r.queue.deferred) != 1 {
				t.Fatalf("%+v, %d deferred; want the job deferred", res, len(r.queue.deferred))
			}
			if h := r.queue.deferred[0].j.Hold; h.Held() || res.WastedSlots != 1 {
				t.Fatalf("deferred holding %+v, %d slots wasted; want its slot given up, one wasted", h, res.WastedSlots)
			}
		})
	}
}
