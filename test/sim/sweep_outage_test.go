package sim

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// twoHotels is two properties on one credential, each one connection.
const twoHotels = `"hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1001"}],
    "hotel-borealis": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-2002"}]`

// The limiter's table is down for longer than a push job lives (here
// max_deferrals 5 at a 2 s store cooldown stands for DefaultPolicy's 200
// at 10 s, about 35 minutes, an hour's outage outlasting it), and no
// change arrives after it: every job expires, each lane keeps its
// changes, and once the store is back one sweep schedules every stranded
// lane, so that every lane ends fresh at the OTA without a new change.
func TestLimiterOutageOfAnHourEndsFresh(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, connconfig.Booking(lim, `, "max_deferrals": 5`, twoHotels),
		func(d *dispatch.Dispatcher) { d.Policy.StoreCooldown = 2 * time.Second })
	aurora, borealis := newPMSOracle("hotel-aurora"), newPMSOracle("hotel-borealis")
	var bodies []string
	for i, kind := range []string{"availability", "rates"} {
		bodies = append(bodies, aurora.change(kind, "DBL", "2027-03-01", "2027-03-04", 10+i))
		bodies = append(bodies, borealis.change(kind, "TWN", "2027-03-02", "2027-03-02", 20+i))
	}

	m.limiterDown.Store(true)
	m.changes(bodies, 2)
	m.drain(200)
	if n := len(m.ota.Requests()); n != 0 {
		t.Fatalf("the OTA got %d requests with the limiter's table down, want none", n)
	}
	expired := 0
	for _, res := range m.results {
		if res.Outcome == dispatch.Expired {
			expired++
		}
	}
	if expired != 4 {
		t.Fatalf("%d lane jobs expired, want all 4", expired)
	}
	for _, l := range []struct{ pk, suffix string }{
		{"hotel-aurora#availability", "booking_com#cred-1#BK-1001"}, {"hotel-aurora#rates", "booking_com#cred-1#BK-1001"},
		{"hotel-borealis#availability", "booking_com#cred-1#BK-2002"}, {"hotel-borealis#rates", "booking_com#cred-1#BK-2002"},
	} {
		set, _ := memLaneItem(t, m.store, l.pk)["d:"+l.suffix].(*types.AttributeValueMemberSS)
		if set == nil || len(set.Value) != 1 {
			t.Fatalf("lane %s %s has %v pending after its job expired, want its change", l.pk, l.suffix, set)
		}
	}
	m.sent.take(deadURL) // the expired jobs: the sweep, not a redrive, recovers here

	// The store is back; no change comes. The sweep finds the stranded
	// lanes in its index and schedules them.
	m.limiterDown.Store(false)
	rep := m.sweep()
	m.drain(200)

	aurora.assertNewest(t, m.ota, "BK-1001")
	borealis.assertNewest(t, m.ota, "BK-2002")
	if rep.Lanes != 4 || rep.Items != 4 {
		t.Errorf("sweep: %+v, want the 4 stranded lanes of 4 items", rep)
	}
	if n := m.ota.Count429(); n != 0 {
		t.Errorf("the OTA answered %d requests 429, want none", n)
	}
	if dlq := m.sent.deadLetters(deadURL); len(dlq) != 0 {
		t.Errorf("after the sweep %d messages were dead-lettered: %v", len(dlq), dlq)
	}
	// Nothing is due right after: the index holds no lane to push again.
	if again := m.sweep(); again.Items != 0 || again.Lanes != 0 {
		t.Errorf("a second sweep right after found %+v, want nothing due", again)
	}
	t.Logf("4 jobs expired behind the outage; one sweep pushed all 4 lanes in %d OTA requests", len(m.ota.Accepted()))
}

// sweep runs one sweep on the worker, as the scheduled invocation would,
// and keeps what it deferred.
func (m *memLanes) sweep() syncer.SweepReport {
	m.t.Helper()
	rep, err := m.sy.Sweep(context.Background())
	if err != nil {
		m.t.Fatalf("sweep: %v", err)
	}
	m.results = append(m.results, rep.Results...)
	m.pending = append(m.pending, m.sent.takeJobs(m.t, deferredURL)...)
	return rep
}
