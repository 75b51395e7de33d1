package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// urgentMeterConfig is rates (normal) and availability (urgent) of one
// hotel on one meter of lim, with reserve tokens of its burst kept for
// urgent pushes.
func urgentMeterConfig(lim limiter.Limit, reserve int) func(string) string {
	return func(url string) string {
		ep := func(extra string) string {
			return fmt.Sprintf(`{"path": "/v1/ari", "meter": "ari", "limit": {"rate": %g, "burst": %d}, "urgent_reserve": %d%s}`,
				lim.Rate, lim.Burst, reserve, extra)
		}
		return fmt.Sprintf(`{
  "channels": {"booking_com": {
    "base_url": %q, "allow_http": true,
    "endpoints": {"availability": %s, "rates": %s},
    "credentials": {"cred-1": {"token_env": "T"}}
  }},
  "properties": {"hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1001"}]}
}`, url, ep(`, "priority": "urgent"`), ep(""))
	}
}

// A normal lane stuck behind an urgent backlog (the meter booked ahead by
// urgent pushes, so the normal share has no token now) expires again and
// again while the backlog lasts, with no request sent and no token spent.
// Each expiry strands the lane, and the sweep must take it up again at
// once every time, not back off as from a lane whose pushes the vendor
// keeps failing (15 min, doubling to 4 h). Once the backlog is over, the
// sweep pushes the lane's change with no new change.
func TestExpiredLaneBehindAnUrgentReserveIsNotBackedOff(t *testing.T) {
	lim := limiter.PerSecond(2, 8)
	m := newMemLanes(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, urgentMeterConfig(lim, 4),
		func(d *dispatch.Dispatcher) { d.Policy.MaxAge = 2 * time.Second })
	src := newPMSOracle("hotel-aurora")
	ctx := context.Background()
	const pk, suffix = "hotel-aurora#rates", "booking_com#cred-1#BK-1001"

	// The urgent backlog: urgent pushes have booked the whole meter about
	// 6 s ahead (and a burst beyond), more than the dispatcher blocks for
	// and than a job lives (2 s), so every normal push is deferred past its
	// max_age. It is booked again before each round, as urgent pushes that
	// keep coming would.
	payload, _ := json.Marshal(map[string]string{"property_id": "hotel-aurora"})
	urgent, err := m.sy.Route(job.Job{ID: "probe", Channel: "booking_com", Credential: "cred-1", Endpoint: "availability", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := limiter.New(m.store, limiter.WithTable("limits"), limiter.WithClock(m.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	var backlog time.Time
	book := func() {
		t.Helper()
		for ahead := m.clock.Now().Add(6 * time.Second); !backlog.After(ahead); {
			res, err := lm.Reserve(ctx, urgent.Bucket, 4, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			backlog = res.Slot
		}
	}
	// outlasted fails a round that took as long as the backlog ahead of
	// it, whose job then found a token within its max_age: what it checks
	// would not have been met.
	outlasted := func(round int) {
		t.Helper()
		if m.clock.Now().After(backlog.Add(-2 * time.Second)) {
			t.Fatalf("round %d outlasted the urgent backlog booked 6 s ahead before it", round)
		}
	}
	expired := func(round int, results []dispatch.Result) {
		t.Helper()
		if len(results) != 1 || results[0].Outcome != dispatch.Expired || len(m.pending) != 0 {
			t.Fatalf("round %d: %+v (%d deferred), want the lane job expired behind the urgent backlog", round, results, len(m.pending))
		}
		if n := pendingLen(t, m, pk, suffix); n != 1 {
			t.Fatalf("round %d: the expired lane has %d pending, want its change", round, n)
		}
		f, _ := memLaneItem(t, m.store, pk)["f:"+suffix].(*types.AttributeValueMemberN)
		if f != nil && f.Value != "0" {
			t.Errorf("round %d: the lane counts %s failures after an expiry that sent nothing (%s), want none",
				round, f.Value, results[0].Reason)
		}
	}

	book()
	m.changes([]string{src.change("rates", "DBL", "2027-04-01", "2027-04-02", 7)}, 10)
	outlasted(0)
	expired(0, m.results)
	const rounds = 3
	for round := 1; round <= rounds; round++ {
		book()
		rep := m.sweep()
		outlasted(round)
		if rep.Lanes != 1 {
			t.Fatalf("round %d: the sweep right after the lane's expiry %d took up %d lanes (%+v), want it at once: it never failed at the vendor",
				round, round, rep.Lanes, rep)
		}
		expired(round, rep.Results)
	}
	if n := len(m.ota.Requests()); n != 0 {
		t.Fatalf("the OTA got %d requests behind the urgent backlog, want none", n)
	}

	// The backlog is over (an urgent slot leaves the meter a burst, 4 s,
	// booked beyond it); no change comes. The sweep pushes the lane.
	m.clock.Set(backlog.Add(4 * time.Second))
	if rep := m.sweep(); rep.Lanes != 1 || len(rep.Results) != 1 || rep.Results[0].Outcome == dispatch.Expired {
		t.Fatalf("the sweep after the backlog: %+v, want the lane taken up and pushed", rep)
	}
	m.drain(100)
	src.assertNewest(t, m.ota, "BK-1001")
	if n := pendingLen(t, m, pk, suffix); n != 0 {
		t.Errorf("the lane still has %d pending after its push", n)
	}
	t.Logf("expired %d times behind the urgent backlog, swept at once each time; pushed in %d OTA request(s) after it", rounds+1, len(m.ota.Accepted()))
}
