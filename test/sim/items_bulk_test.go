package sim

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/internal/vendoritems"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A resync's element larger than the burst on an endpoint metered by
// items goes in parts, and each bulk push carries days not yet sent, even
// when SQS delivers the bulk job twice. The copy, granted its token, found
// the lane parked by the other's chain and claimed it, dropping the parts
// that chain carried, and each chain then claimed the lane back at its own
// slot: the lane sent its element's first days again and again, and never
// the rest (adversary seed 1205: expedia, burst 10, elements of 31 days,
// every push 9 items, an hour of pushes without reaching March).
func TestBulkElementLargerThanTheBurstReachesEveryDayWithADuplicateJob(t *testing.T) {
	const burst, days = 5, 31
	itemLimit := limiter.PerSecond(1, burst)
	m := newMemLanes(t, mockota.Config{Limit: limiter.PerSecond(1000, 1000)},
		connconfig.Booking(itemLimit, `, "cost": "items", "max_deferrals": 50`, auroraBK1001), nil)
	src := newPMSOracle("hotel-aurora")
	m.changes([]string{src.change("rates", "DBL", "2027-02-01", "2027-03-03", 100)}, 10)
	m.drain(100)
	before := len(m.ota.Accepted())

	m.clock.Advance(time.Minute)
	body := resyncEvent(t, m, "2027-02-01", "2027-03-03")
	m.handle([]syncer.Message{{ID: "rs-1", Body: body}})
	if len(m.pending) != 1 || !strings.Contains(m.pending[0].ID, "@b-") {
		t.Fatalf("deferred %v, want the resync's one bulk job", m.pending)
	}
	m.pending = append(m.pending, m.pending[0]) // delivered twice
	for i := 0; len(m.pending) > 0 && i < 200; i++ {
		m.deliverNext()
	}
	if len(m.pending) > 0 {
		t.Errorf("%d bulk jobs still deferred after 200 deliveries, want none", len(m.pending))
	}

	src.assertNewest(t, m.ota, "BK-1001")
	sent := map[string]int{}
	for i, req := range m.ota.Accepted()[before:] {
		if n := vendoritems.Count(t, req.Body); n > burst {
			t.Errorf("bulk push %d carried %d items, more than the burst of %d", i, n, burst)
		}
		for _, d := range pushDates(t, req.Body) {
			sent[d]++
		}
	}
	assertEachDayOnce(t, sent, days)
}

// assertEachDayOnce fails t unless sent, the times each day went, holds
// days days, each sent once.
func assertEachDayOnce(t *testing.T, sent map[string]int, days int) {
	t.Helper()
	for _, d := range slices.Sorted(maps.Keys(sent)) {
		if n := sent[d]; n > 1 {
			t.Errorf("%s went %d times: a bulk push sent days an earlier one had sent", d, n)
		}
	}
	if len(sent) != days {
		t.Errorf("the resync sent %d days, want %d", len(sent), days)
	}
}

// pushDates are the (room, plan, date) items a push body carries, decoded
// apart from the SDK's rendering.
func pushDates(t *testing.T, body []byte) []string {
	t.Helper()
	var push struct {
		Items []struct {
			Room string `json:"room_type"`
			Plan string `json:"rate_plan"`
			Days []struct {
				Date string `json:"date"`
			} `json:"days"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &push); err != nil {
		t.Fatalf("push body %s: %v", body, err)
	}
	var out []string
	for _, it := range push.Items {
		for _, d := range it.Days {
			out = append(out, it.Room+"/"+it.Plan+" "+d.Date)
		}
	}
	return out
}

// A live change that lands during a bulk push of an element larger than
// the burst takes the lane at that push's end (handToLive), with what the
// push sent of the element; the live chain, its change out, hands the
// lane to a new bulk job, which must resume the element after those days,
// not send them again.
func TestBulkPartSurvivesALiveChangeDuringItsPush(t *testing.T) {
	const burst, days = 5, 31
	itemLimit := limiter.PerSecond(1, burst)
	m := newMemLanes(t, mockota.Config{Limit: limiter.PerSecond(1000, 1000)},
		connconfig.Booking(itemLimit, `, "cost": "items", "max_deferrals": 50`, auroraBK1001), nil)
	hook := &afterBulkRead{DB: m.store}
	m.sy.Lanes = &lane.Store{DB: hook, Table: "state", Now: m.clock.Now}
	m.sy.State = &ari.Store{DB: hook, Table: "state"}
	src := newPMSOracle("hotel-aurora")
	m.changes([]string{src.change("rates", "DBL", "2027-02-01", "2027-03-03", 100)}, 10)
	m.drain(100)
	before := len(m.ota.Accepted())

	m.clock.Advance(time.Minute)
	newer := src.change("rates", "TWN", "2027-04-01", "2027-04-01", 200) // another cell: its day is not the resync's
	hook.live = liveChangeIn(t, m, newer)
	hook.armed.Store(true)
	body := resyncEvent(t, m, "2027-02-01", "2027-03-03")
	m.handle([]syncer.Message{{ID: "rs-1", Body: body}})
	for i := 0; len(m.pending) > 0 && i < 200; i++ {
		m.deliverNext()
	}
	if hook.armed.Load() {
		t.Fatal("no bulk push claimed and read its lane: the test did not run its case")
	}
	if len(m.pending) > 0 {
		t.Errorf("%d jobs still deferred after 200 deliveries, want none", len(m.pending))
	}

	src.assertNewest(t, m.ota, "BK-1001")
	sent := map[string]int{}
	for _, req := range m.ota.Accepted()[before:] {
		for _, d := range pushDates(t, req.Body) {
			if strings.HasPrefix(d, "DBL/BAR ") {
				sent[d]++
			}
		}
	}
	assertEachDayOnce(t, sent, days)
}
