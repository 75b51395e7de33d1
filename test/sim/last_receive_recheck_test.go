package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A lane job's receive dies in its push, the lane claimed under a token
// only that invocation knew, and a second delivery of the job finds the
// lane so held: it comes back as a recheck job at the lease's end. That
// job takes the lane over on each receive and dies in its push each time
// too (every deferred invocation dying 50 ms in). Its last receive must
// hand the lane to the sweep as any lane job's does: before, a recheck
// job worked on its last receive, died there, and SQS's redrive moved it
// with no reason, the lane held by its dead claim and listed for no sweep
// (adversary seed 30 with deferred-deaths: 2-12 days stale after a 2 h
// drain, 2 runs of 3).
func TestARecheckJobKilledOnEveryReceiveHandsItsLaneToTheSweep(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	pusher := &dyingPusher{}
	m := newMemLanes(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, connconfig.Booking(lim, "", auroraBK1001),
		func(d *dispatch.Dispatcher) { pusher.Pusher, d.Pusher = d.Pusher, pusher })
	m.sy.MaxReceives = maxReceiveCount
	src := newPMSOracle("hotel-aurora")
	const lane = "hotel-aurora#rates#booking_com#cred-1#BK-1001"

	// A booked bucket defers the lane's job: its message is the deferred
	// queue's.
	booked := m.bookRates(lim, 6*time.Second)
	m.changes([]string{src.change("rates", "DBL", "2027-04-01", "2027-04-02", 7)}, 10)
	if len(m.pending) != 1 {
		t.Fatalf("change into a booked bucket: %+v, %d deferred; want its lane job deferred", m.results, len(m.pending))
	}
	j := m.pending[0]
	m.pending = nil

	// receive delivers j's message for its nth time; the invocation dies
	// if it reaches the vendor. It returns what the invocation sent that
	// outlived it: the deferred jobs and the dead letters.
	receive := func(j job.Job, n int) (died bool, deferred []job.Job, dead map[string]string) {
		t.Helper()
		body, err := job.Encode(j)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pusher.cancel = cancel
		pusher.armed.Store(true)
		pusher.died.Store(false)
		m.sy.HandleBatch(ctx, []syncer.Message{{ID: j.ID, Body: body, Deferred: true, Receives: n}})
		pusher.armed.Store(false)
		if pusher.died.Load() {
			m.sent.take(deferredURL)
			m.sent.take(deadURL)
			return true, nil, nil
		}
		return false, m.sent.takeJobs(t, deferredURL), m.sent.deadLetters(deadURL)
	}

	m.clock.Set(booked)
	if died, _, _ := receive(j, 1); !died {
		t.Fatal("the job's first receive did not reach its push")
	}
	// A second delivery of the same message while the dead claim's lease
	// runs.
	m.clock.Set(booked.Add(time.Second))
	died, recheck, _ := receive(j, 1)
	if died || len(recheck) != 1 {
		t.Fatalf("the job's copy: died %v, deferred %d; want one recheck job deferred", died, len(recheck))
	}
	r := recheck[0]
	// Back at the dead claim's lease's end (a push's budget past it, at
	// most): past it, the job takes the lane over.
	due := booked.Add(visibility / 2)
	var dlq map[string]string
	for n := 1; n <= maxReceiveCount; n++ {
		m.clock.Set(due.Add(time.Duration(n-1) * visibility))
		died, _, dead := receive(r, n)
		if n < maxReceiveCount {
			if !died {
				t.Fatalf("the recheck job's receive %d did not reach its push", n)
			}
			continue
		}
		if died {
			t.Fatalf("the recheck job's last receive (%d of %d) worked and died in its push: SQS's redrive moves it with no reason", n, maxReceiveCount)
		}
		dlq = dead
	}

	m.clock.Advance(visibility)
	rep := m.sweep()
	m.drain(100)
	if rep.Lanes != 1 {
		t.Errorf("sweep: %+v, want the lane the recheck job handed over", rep)
	}
	src.assertNewest(t, m.ota, "BK-1001")
	if n := pendingLen(t, m, "hotel-aurora#rates", "booking_com#cred-1#BK-1001"); n != 0 {
		t.Errorf("the lane still has %d pending", n)
	}
	assertLaneDeadLetters(t, dlq, 1, lane)
	for _, reason := range dlq {
		if !strings.Contains(reason, "maxReceiveCount") {
			t.Errorf("dead letter's reason %q, want the receives it had", reason)
		}
	}
}
