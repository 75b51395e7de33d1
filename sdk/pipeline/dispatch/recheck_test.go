package dispatch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// ownerWork is a lane held by another owner that stays alive for alive
// more rechecks: a job carrying "recheck" is told to come back when the
// owner's lease ends; once the owner is gone it takes the lane over.
type ownerWork struct {
	clock  clock
	alive  int
	begins int
}

func (w *ownerWork) Rechecks(j job.Job) bool { return string(j.Payload) == "recheck" }

func (w *ownerWork) Begin(_ context.Context, j job.Job) (job.Job, Payload, error) {
	w.begins++
	if string(j.Payload) == "recheck" {
		if w.alive > 0 {
			w.alive--
			j.Hold.At, j.Hold.Key = time.Time{}, "" // the slot is the owner's to use
			return j, Payload{}, &RecheckError{At: w.clock.Now().Add(3 * time.Second), Reason: "lane owned by another"}
		}
		j.Payload = []byte("owner") // taken over
	}
	return j, Payload{Body: []byte("state"), Items: 1}, nil
}

func (w *ownerWork) Done(context.Context, job.Job, Payload) (*job.Job, error) { return nil, nil }
func (w *ownerWork) Hold(context.Context, job.Job, time.Time) error           { return nil }

// A job that only comes back to see whether another owner of its work is
// still alive books no slot (one would go unused and uncounted) until its
// work is its own: two rechecks find the owner alive, the third takes
// over and pushes, and the bucket sees exactly one reservation.
func TestRecheckJobsDoNotSpendSlots(t *testing.T) {
	t0 := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	c := limitertest.NewClock(t0)
	b := bucketAt(t, c, plain.Bucket, 0)
	q := &fakeQueue{}
	p := &timedPusher{clock: c, t0: t0}
	w := &ownerWork{clock: c, alive: 2}
	d := &worker{&Dispatcher{Limiter: b, Pusher: p, Queue: q, Policy: DefaultPolicy, Now: c.Now, Sleep: c.Sleep, Can: reserveAndBatch(b)}, w, fixedRoute(plain)}
	j := testJob(t0)
	j.Payload = []byte("recheck")
	var outcomes []string
	wasted := 0
	for range 5 {
		res, err := d.HandleJob(t.Context(), j)
		if err != nil {
			t.Fatal(err)
		}
		outcomes, wasted = append(outcomes, string(res.Outcome)), wasted+res.WastedSlots
		if res.Outcome != Deferred {
			break
		}
		_ = c.Sleep(t.Context(), res.Wait)
		j = q.deferred[len(q.deferred)-1].j
	}
	if want := "[deferred deferred pushed]"; fmt.Sprint(outcomes) != want {
		t.Fatalf("outcomes %v, want %s", outcomes, want)
	}
	if got := reservations(b); len(got) != 1 || len(p.at) != 1 {
		t.Fatalf("reservations %v and %d pushes; want one reservation, for the push after the takeover (%d slots counted wasted)", got, len(p.at), wasted)
	}
	if wasted != 0 {
		t.Fatalf("%d slots counted wasted, want 0 (none was booked for a recheck)", wasted)
	}
}
