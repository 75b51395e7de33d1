package dispatch

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// noMargin is a 20/s bucket of burst 1: no margin fits, so a slot answered
// after it has passed leaves beside the next (adversary seed 21).
var noMargin = Route{Bucket: limiter.Bucket{Key: "bk#c#rates", Limit: limiter.PerSecond(20, 1)}, URL: "http://ota.invalid", Header: http.Header{}}

// A lingering job's early slot, booked alone (lingerSlot) or with its
// batch (bookLingering), lies as far past the call as grants have taken
// to be answered, so that a store as slow again answers before it: on a
// full bucket the slot is otherwise the now the write claimed, and the
// push leaves the store's whole latency after it. The first booking has
// seen no answer yet (and the bucket keeps no margin to go by): its
// first slot is answered 40 ms late. The next, a second later on a full
// bucket again, has seen one answer of 40 ms and books 50 ms ahead (a
// quarter more, as the slowest-call lead keeps): on time.
func TestLingeringSlotsAreBookedAheadOfTheStoresLatency(t *testing.T) {
	t0 := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name string
		jobs int // 1: HandleJob books alone; more: one batch write
		// want, each round: the slots after its start, and how late the
		// first slot was answered (alone: how long after it the push left)
		wantSlots [2][]time.Duration
		wantLate  [2]time.Duration
	}{
		{"alone", 1, [2][]time.Duration{{0}, {50 * ms}}, [2]time.Duration{40 * ms, 0}},
		{"a batch of three", 3, [2][]time.Duration{{0, 50 * ms, 100 * ms}, {50 * ms, 100 * ms, 150 * ms}}, [2]time.Duration{40 * ms, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := limitertest.NewClock(t0)
			// Every booking is answered 40 ms after the now its write
			// claimed, as a store's is: the decision is made at the
			// call's clock (or the time it books ahead to).
			s := limitertest.New(limitertest.WithClock(c.Now), limitertest.WithSleep(c.Sleep),
				limitertest.WithLatency(func(string, string) time.Duration { return 40 * ms }))
			p := &timedPusher{clock: c, t0: t0}
			d := &worker{&Dispatcher{Limiter: s, Pusher: p, Queue: &fakeQueue{}, Policy: DefaultPolicy, Now: c.Now, Sleep: c.Sleep,
				Can: Capabilities{Ahead: s.ReserveAhead, Batch: s.ReserveBatch}}, nil, fixedRoute(noMargin)}
			for round := range 2 {
				start := t0.Add(time.Duration(round) * time.Second) // the bucket is full again
				c.Set(start)
				slots, late := lingerRound(t, d, p, c, start, tt.jobs)
				var got []time.Duration
				for _, slot := range slots {
					got = append(got, slot.Sub(start))
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.wantSlots[round]) || late != tt.wantLate[round] {
					t.Errorf("round %d: slots %v, the first late by %v; want %v, late by %v", round, got, late, tt.wantSlots[round], tt.wantLate[round])
				}
			}
		})
	}
}

// lingerRound books n lingering jobs due a second after start on d: one
// alone through HandleJob, which pushes it, more through lingerGroups. It
// returns their slots and how late the first one was: for a job alone,
// how long after its slot its push left; for a batch, how long after the
// first slot the store answered.
func lingerRound(t *testing.T, d *worker, p *timedPusher, c clock, start time.Time, n int) ([]time.Time, time.Duration) {
	t.Helper()
	jobs := make([]job.Job, n)
	for i := range jobs {
		jobs[i] = testJob(start)
		jobs[i].ID = fmt.Sprintf("lane-%d@tok", i)
		jobs[i].NotBefore, jobs[i].Linger = start.Add(time.Second), true
	}
	if n == 1 {
		pushed := len(p.at)
		res, err := d.HandleJob(t.Context(), jobs[0])
		if err != nil || res.Outcome != Pushed || len(p.at) != pushed+1 {
			t.Fatalf("result %+v, err %v; want one push", res, err)
		}
		return []time.Time{res.Slot}, p.t0.Add(p.at[pushed]).Sub(res.Slot)
	}
	tasks := d.tasks(jobs)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	bookAll(t.Context(), d.lingerGroups(d.Can.Batch, tasks, idx))
	var slots []time.Time
	for _, j := range jobsOf(tasks) {
		if j.Hold.Held() {
			slots = append(slots, j.Hold.At)
		}
	}
	if len(slots) == 0 {
		t.Fatal("the batch booked no slot")
	}
	return slots, max(c.Now().Sub(slots[0]), 0)
}
