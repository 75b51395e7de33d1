package sim

import (
	"testing"
	"testing/synctest"
	"time"
)

// reorderOutage is a small scenario for the lanes' ordering logic: one
// property's changes on two endpoints of one channel, 80 of them over
// 5 s (ranges of up to 5 days within 20), three workers a queue so that
// changes are applied out of order, one receive in 20 handing a message
// out twice (more chains duplicates of duplicates up to the queue's
// maxReceiveCount, which dead-letters them by design), no linger (every
// lane pushes at its slot, so that reordering meets many pushes), and
// DynamoDB out for 3 s in the middle, at a vendor whose limit is as tight
// as the fleet's (5/s, burst 3).
func reorderOutage(seed uint64) Scenario {
	s := oneProperty("reorder-outage", "1 property, 80 changes in 5 s on 2 endpoints, 5% of receives duplicated, DynamoDB out 2.5–5.5 s",
		"availability", "rates")
	s.Seed, s.Channels[0].Burst, s.MaxConcurrency = seed, 3, 3
	s.Load.Duration, s.Load.Rate, s.Load.MaxDays, s.Load.Rooms = 5*time.Second, func(time.Duration) float64 { return 16 }, 5, 2
	s.Faults = Faults{DBOutage: [2]time.Duration{2500 * time.Millisecond, 5500 * time.Millisecond}, Duplicates: 0.05}
	return s
}

// Changes delivered out of order and twice, with DynamoDB unreachable for
// a while in the middle: the OTA ends with the newest value of every date,
// nothing is lost or dead-lettered, and the vendor's limit holds by its
// own window (no 429, no window over burst + rate·W).
func TestLanesEndAtTheNewestStateDespiteReorderingDuplicatesAndAnOutage(t *testing.T) {
	seed := testSeed(t)
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		r, err := Run(t.Context(), reorderOutage(seed), nil)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		rep = r
	})
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("seed %d (replay: FLEETBUCKET_SIM_SEED=%d): "+format, append([]any{seed, seed}, args...)...)
	}
	for _, v := range rep.Violations {
		fail("%s", v)
	}
	if rep.Stale != 0 || rep.WentBack != 0 {
		fail("%d dates stale and %d gone back at the OTA: %v", rep.Stale, rep.WentBack, rep.StaleExamples)
	}
	if rep.Throttled != 0 || rep.StrictExceedances != 0 {
		fail("%d 429s and %d sends over burst + rate·W at the vendor, want 0: %v", rep.Throttled, rep.StrictExceedances, rep.Strict)
	}
	if len(rep.DeadByReason) != 0 {
		fail("dead letters: %v, want none", rep.DeadByReason)
	}
	// What the run must have met for the test to mean anything: the
	// changes, and pushes after the first one of each lane.
	if rep.Stats.Changes < 60 || rep.Accepted < 4 {
		fail("%d changes, %d accepted pushes: too little happened", rep.Stats.Changes, rep.Accepted)
	}
	if rep.DB.Failed == 0 {
		fail("no DynamoDB call failed: the outage tested nothing")
	}
	t.Logf("%d changes → %d OTA requests (%d accepted); %d DynamoDB calls failed in the outage; %d invocations",
		rep.Stats.Changes, rep.Requests, rep.Accepted, rep.DB.Failed, rep.Stats.Invocations)
}
