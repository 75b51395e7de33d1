package sim

import (
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A lane job's message is killed on every receive the deferred queue's
// redrive policy allows, each time before its invocation's first write
// lands (a death 50 ms in beside a store answering in some 278 ms), the
// last receive's hand-over too: SQS moves it to the dead-letter queue with
// no reason of the worker's, and no write of the job ever said the lane
// was stranded. The deferral that sent the job listed the lane for the
// sweep at its lease's end (lane.Store.Renew), so the sweep takes it over
// once that lease is over and pushes the change with no new change.
// (Adversary seed 3 with deferred-deaths 50 ms in: 31 lane jobs redriven,
// 14-156 days stale.)
func TestALaneJobKilledBeforeItsFirstWriteOnEveryReceiveStillReachesTheOTA(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, connconfig.Booking(lim, "", auroraBK1001), nil)
	m.sy.MaxReceives = maxReceiveCount
	src := newPMSOracle("hotel-aurora")

	// A booked bucket defers the lane's job, well within the lease its
	// mark took: the deferral needs no renewal of its own.
	m.bookRates(lim, 6*time.Second)
	m.changes([]string{src.change("rates", "DBL", "2027-04-01", "2027-04-02", 7)}, 10)
	if len(m.pending) != 1 {
		t.Fatalf("change into a booked bucket: %+v, %d deferred; want its lane job deferred", m.results, len(m.pending))
	}
	m.pending = nil // every receive dies before it writes; the redrive takes the message

	var swept syncer.SweepReport
	for at := time.Duration(0); at <= maxReceiveCount*visibility; at += syncer.SweepInterval {
		m.clock.Advance(syncer.SweepInterval)
		rep := m.sweep()
		swept.Items, swept.Lanes = swept.Items+rep.Items, swept.Lanes+rep.Lanes
	}
	m.drain(100)
	if swept.Lanes != 1 {
		t.Errorf("sweeps over the job's receives: %d items read, %d lanes taken over; want its lane", swept.Items, swept.Lanes)
	}
	src.assertNewest(t, m.ota, "BK-1001")
	if n := pendingLen(t, m, "hotel-aurora#rates", "booking_com#cred-1#BK-1001"); n != 0 {
		t.Errorf("the lane still has %d pending", n)
	}
}
