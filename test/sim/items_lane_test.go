package sim

import (
	"testing"
	"time"

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

// Issue 27 (adversary seeds 558, 559): on an endpoint metered by items a
// push carries the whole changes its tokens pay for, so changes whose
// dates overlap each sent the shared dates again: a PMS repricing the
// same weeks over and over made a lane send its dates once per change.
// Seed 558's 14 lanes held 8,223 items in their changes and 932 distinct
// ones, sent in 2,021 requests of 3.2 items on a 5/s bucket, and the hour's
// drain ended with 23 dates stale. The owner merges the overlapping
// changes after its claim (lane.Merge), so each date goes once: here ten
// changes of 8 dates, each a day after the last, are 17 distinct dates.
func TestOverlappingChangesOfAnItemsLaneGoOnce(t *testing.T) {
	const rate, burst, changes, days = 10.0, 5, 10, 8
	itemLimit := limiter.PerSecond(rate, burst)
	m := newMemLanes(t, mockota.Config{Limit: limiter.PerSecond(1000, 1000)},
		connconfig.Booking(itemLimit, `, "cost": "items", "max_deferrals": 50`, auroraBK1001), nil)
	src := newPMSOracle("hotel-aurora")
	first := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range changes {
		from := first.AddDate(0, 0, i)
		src.change("rates", "DBL", from.Format(time.DateOnly), from.AddDate(0, 0, days-1).Format(time.DateOnly), 100+i)
	}
	m.changes(src.bodies, changes)
	m.drain(200)

	src.assertNewest(t, m.ota, "BK-1001")
	sum := 0
	for _, req := range m.ota.Accepted() {
		sum += vendoritems.Count(t, req.Body)
	}
	// 17 distinct dates, and the first change's again at most: the mark's
	// own push sends it, in parts, before any claim merges, and its part
	// stays apart so that its accepted dates do not go again. Unmerged,
	// every change went whole: 20 pushes of 80 items.
	distinct := changes + days - 1
	if n := len(m.ota.Accepted()); n > 8 || sum > distinct+days {
		t.Errorf("%d pushes carried %d items, want at most 8 pushes and %d items (%d distinct dates, the first change's %d again)",
			n, sum, distinct+days, distinct, days)
	}
	t.Logf("%d pushes, %d items", len(m.ota.Accepted()), sum)
}
