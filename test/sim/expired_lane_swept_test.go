package sim

import (
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A lane job expires at its max_age (no slot before it: the bucket is
// booked past it) and is dead-lettered; the lane keeps its change. The
// sweep pushes it once a slot is free, with no new change; and the
// expired job, redriven afterwards, finds the lane served and pushes
// nothing more. The redrive is played as `fleetbucket dlq redrive` plays
// it (the job, its lifetime started over, back on the deferred queue);
// the redrive's own reading and moving of SQS messages is tested on the
// emulator (test/integration, TestRefusedLanePushKeepsItsChanges).
func TestExpiredLaneIsSweptAndPushed(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, connconfig.Booking(lim, "", auroraBK1001),
		func(d *dispatch.Dispatcher) { d.Policy.MaxAge = 3 * time.Second })
	src := newPMSOracle("hotel-aurora")
	const pk, suffix = "hotel-aurora#rates", "booking_com#cred-1#BK-1001"
	const lane = pk + "#" + suffix

	booked := m.bookRates(lim, 6*time.Second)
	m.changes([]string{src.change("rates", "DBL", "2027-04-01", "2027-04-02", 7)}, 10)
	if len(m.results) != 1 || m.results[0].Outcome != dispatch.Expired || len(m.pending) != 0 {
		t.Fatalf("change into a bucket booked past max_age: %+v (%d deferred), want its lane job expired", m.results, len(m.pending))
	}
	if n := pendingLen(t, m, pk, suffix); n != 1 {
		t.Fatalf("the expired lane has %d pending, want its change", n)
	}
	expired := m.sent.deadLetters(deadURL)
	assertLaneDeadLetters(t, expired, 1, lane)

	m.clock.Set(booked)
	rep := m.sweep()
	m.drain(100)
	src.assertNewest(t, m.ota, "BK-1001")
	if rep.Lanes != 1 {
		t.Errorf("sweep: %+v, want the one stranded lane", rep)
	}
	pushes := len(m.ota.Accepted())

	for body := range expired {
		j, err := job.Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		again, err := job.Encode(j.Restarted(m.clock.Now()))
		if err != nil {
			t.Fatal(err)
		}
		m.handle([]syncer.Message{{ID: "redriven", Body: again, Deferred: true}})
	}
	m.drain(100)
	if n := len(m.ota.Accepted()); n != pushes {
		t.Errorf("the redriven expired job pushed %d more, want none: the sweep served its lane", n-pushes)
	}
	if n := pendingLen(t, m, pk, suffix); n != 0 {
		t.Errorf("the lane still has %d pending", n)
	}
	if dlq := m.sent.deadLetters(deadURL); len(dlq) != 0 {
		t.Errorf("after the sweep and the redrive %d messages were dead-lettered: %v", len(dlq), reasons(dlq))
	}
}
