package sim

import (
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/internal/vendoritems"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// Issue 17, item 5: on an endpoint metered by items, a change with more
// items than the burst pays for (a 30-day rate change on a burst of 20)
// could never be pushed: a push carried whole changes only, so the job
// was deferred to book a burst again, wasting it, until it expired. The
// change is split by date at push time: every date arrives with its
// newest value, no push carries more than the burst, and no slot is
// wasted. On the manual clock every deferred job comes back at its slot,
// so a wasted slot is the pipeline's, never a loaded machine's.
func TestItemsChangeLargerThanBurstArrives(t *testing.T) {
	const rate, burst = 40.0, 20
	itemLimit := limiter.PerSecond(rate, burst)
	m := newMemLanes(t, mockota.Config{Limit: limiter.PerSecond(1000, 1000)},
		connconfig.Booking(itemLimit, `, "cost": "items", "max_deferrals": 20`, auroraBK1001), nil)
	src := newPMSOracle("hotel-aurora")
	src.change("rates", "DBL", "2027-03-01", "2027-03-30", 1) // 30 items
	src.change("rates", "TWN", "2027-05-01", "2027-05-31", 2) // 31 items
	src.change("rates", "DBL", "2027-03-10", "2027-03-12", 3) // newer values for 3 of them
	m.changes(src.bodies, 10)
	m.drain(100)

	src.assertNewest(t, m.ota, "BK-1001")
	sum := 0
	for i, req := range m.ota.Accepted() {
		n := vendoritems.Count(t, req.Body)
		if n > burst {
			t.Errorf("push %d carried %d items, more than the burst of %d", i, n, burst)
		}
		sum += n
	}
	wasted := 0
	for _, res := range m.results {
		wasted += res.WastedSlots
		if res.Outcome == dispatch.Expired || res.Outcome == dispatch.DeadLettered {
			t.Errorf("job %s %s: %s", res.JobID, res.Outcome, res.Reason)
		}
	}
	if wasted != 0 {
		t.Errorf("%d slots wasted, want 0: each round books what its push carries", wasted)
	}
	// 61 distinct items (the newer 3 may go again): 4 pushes at 20 a
	// push, and one more for the newer change if it arrived late.
	if n := len(m.ota.Accepted()); n > 5 || sum < 61 {
		t.Errorf("%d pushes carried %d items, want at most 5 pushes carrying each of the 61 items", n, sum)
	}
	t.Logf("%d pushes, %d items", len(m.ota.Accepted()), sum)
}
