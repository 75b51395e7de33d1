package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
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

// Issue 27: a normal lane stuck behind an urgent backlog (the meter booked
// ahead by urgent pushes, so the normal share has no token now) expires
// again and again while the backlog lasts, with no request sent and no
// token spent. Each expiry strands the lane, and the sweep must take it
// up again at once every time, not back off as from a lane whose pushes
// the vendor keeps failing (15 min, doubling to 4 h). Once the backlog is
// over, the sweep pushes the lane's change with no new change.
func TestExpiredLaneBehindAnUrgentReserveIsNotBackedOff(t *testing.T) {
	lim := limiter.PerSecond(2, 8)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, urgentMeterConfig(lim, 4))
	r.linger = -1
	r.tune = func(d *dispatch.Dispatcher) { d.Policy.MaxAge = 2 * time.Second }
	src := newPMS("hotel-aurora")
	ctx := context.Background()
	const pk, suffix = "hotel-aurora#rates", "booking_com#cred-1#BK-1001"

	// The urgent backlog: urgent pushes have booked the whole meter about
	// 6 s ahead (and a burst beyond), more than the dispatcher blocks for
	// (2 s) and than a job lives (2 s), so every normal push is deferred
	// past its max_age. It is booked again before each round, as urgent
	// pushes that keep coming would, so that it outlasts the rounds however
	// long the emulator takes: booked once for all four, 4 s of the
	// emulator's calls ended it early on a loaded machine.
	payload, _ := json.Marshal(map[string]string{"property_id": "hotel-aurora"})
	urgent, err := r.worker().Route(job.Job{ID: "probe", Channel: "booking_com", Credential: "cred-1", Endpoint: "availability", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	lm := limiterFor(t, r)
	var backlog time.Time
	book := func() {
		t.Helper()
		for ahead := time.Now().Add(6 * time.Second); !backlog.After(ahead); {
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
		if time.Now().After(backlog.Add(-2 * time.Second)) {
			t.Fatalf("round %d outlasted the urgent backlog booked 6 s ahead before it", round)
		}
	}
	book()

	expired := func(round int, results []dispatch.Result) {
		t.Helper()
		if len(results) != 1 || results[0].Outcome != dispatch.Expired {
			t.Fatalf("round %d: %+v, want the lane job expired behind the urgent backlog", round, results)
		}
		item := laneItem(t, r, pk)
		if n := pendingIn(t, r, pk, suffix); n != 1 {
			t.Fatalf("round %d: the expired lane has %d pending, want its change", round, n)
		}
		if f := attrN(item["f:"+suffix]); f != "" && f != "0" {
			t.Errorf("round %d: the lane counts %s failures after an expiry that sent nothing (%s), want none",
				round, f, results[0].Reason)
		}
	}
	out := r.worker().HandleBatch(ctx, []syncer.Message{{ID: "1", Body: src.change("rates", "DBL", "2027-04-01", "2027-04-02", 7)}})[0]
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	outlasted(0)
	expired(0, out.Jobs)
	const rounds = 3
	for round := 1; round <= rounds; round++ {
		book()
		rep := r.sweep()
		outlasted(round)
		if rep.Lanes != 1 {
			t.Fatalf("round %d: the sweep right after the lane's expiry %d took up %d lanes (%+v), want it at once: it never failed at the vendor",
				round, round, rep.Lanes, rep)
		}
		expired(round, rep.Results)
	}
	if n := len(r.ota.Requests()); n != 0 {
		t.Fatalf("the OTA got %d requests behind the urgent backlog, want none", n)
	}

	// The backlog is over (an urgent slot leaves the meter a burst, 4 s,
	// booked beyond it); no change comes. The sweep pushes the lane.
	time.Sleep(time.Until(backlog.Add(4 * time.Second)))
	if rep := r.sweep(); rep.Lanes != 1 || len(rep.Results) != 1 || rep.Results[0].Outcome == dispatch.Expired {
		t.Fatalf("the sweep after the backlog: %+v, want the lane taken up and pushed", rep)
	}
	r.run(1, time.Minute, 5*time.Second)
	src.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")
	if n := pendingIn(t, r, pk, suffix); n != 0 {
		t.Errorf("the lane still has %d pending after its push", n)
	}
	t.Logf("expired %d times behind the urgent backlog, swept at once each time; pushed in %d OTA request(s) after it", rounds+1, len(r.ota.Accepted()))
}

// A stranded lane counts a failure only when its job's pushes failed at
// the vendor: the sweep backs off from those (15 min after the second in
// a row; an expiry between neither counts nor resets them), never from
// jobs that ended with nothing sent. Each row ends the lane's lease once
// per ending (the sweep takes it over in between, the backoff long over)
// and then asks when the sweep takes it up again.
func TestEndLeaseBacksOffOnlyFailedPushes(t *testing.T) {
	t.Parallel()
	id := lane.ID{Property: "hotel-aurora", Kind: "rates", Channel: "booking_com", Credential: "cred-1", HotelRef: "BK-1001"}
	const expired, failed = false, true
	tests := []struct {
		name    string
		endings []bool
		due     time.Duration // after the last stranding
	}{
		{"expired once", []bool{expired}, 0},
		{"expired four times in a row", []bool{expired, expired, expired, expired}, 0},
		{"failed once", []bool{failed}, 0},
		{"failed twice in a row", []bool{failed, failed}, 15 * time.Minute},
		{"failed three times, expiries between", []bool{failed, expired, failed, expired, failed}, 30 * time.Minute},
		{"expired after a failure", []bool{failed, expired}, 0},
		{"failed after expiries", []bool{expired, expired, expired, failed}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
			s := newLaneStore(t, func() time.Time { return now })
			swept := func() []lane.Mark {
				t.Helper()
				items, err := s.Due(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				var marks []lane.Mark
				for _, it := range items {
					m, err := s.Sweep(ctx, it, func(lane.ID) string { return fmt.Sprintf("swept-%d", now.Unix()) })
					if err != nil {
						t.Fatal(err)
					}
					marks = append(marks, m...)
				}
				return marks
			}
			if _, err := s.Mark(ctx, []lane.ID{id}, []lane.Element{el("DBL", 1)}, func(lane.ID) string { return "t0" }); err != nil {
				t.Fatal(err)
			}
			owner := "t0"
			for i, f := range tt.endings {
				if err := s.EndLease(ctx, id, owner, f); err != nil {
					t.Fatal(err)
				}
				if i == len(tt.endings)-1 {
					break
				}
				now = now.Add(5 * time.Hour) // past any backoff
				marks := swept()
				if len(marks) != 1 {
					t.Fatalf("ending %d: the sweep 5 h later took up %d lanes, want the lane", i, len(marks))
				}
				owner = marks[0].Pending.Owner
			}
			stranded := now
			if tt.due > 0 {
				now = stranded.Add(tt.due - time.Second)
				if marks := swept(); len(marks) != 0 {
					t.Fatalf("the sweep %v after the last stranding took the lane up, want it backed off for %v", now.Sub(stranded), tt.due)
				}
			}
			now = stranded.Add(tt.due)
			if marks := swept(); len(marks) != 1 {
				t.Fatalf("the sweep %v after the last stranding took up %d lanes, want the lane", tt.due, len(marks))
			}
		})
	}
}
