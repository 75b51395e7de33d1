package sim

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// localShareOutage is the fleet of TestLocalShareKeepsPushingThroughALimiterOutage:
// eight properties on one credential of one channel (availability and
// rates, 4/s, burst 4, on_store_unavailable local-share), 200 changes
// streamed over 8 s (sixteen lanes want more than the limit, so the limit
// sets the pace), two workers a queue, and the limiter's table (only it:
// the ARI state and the lanes stay up) out from 2 s to 6 s.
func localShareOutage(seed uint64) Scenario {
	return Scenario{
		Name: "local-share-outage", Seed: seed, Properties: 8,
		Channels: []ChannelSpec{{Name: "booking_com", Kinds: []string{"availability", "rates"}, Creds: 1, Rate: 4, Burst: 4,
			Keys: map[string]string{"on_store_unavailable": `"local-share"`}}},
		Load: Load{Duration: 8 * time.Second, Rate: func(time.Duration) float64 { return 25 }, Kinds: [3]float64{1, 1, 0},
			MaxDays: 5, WithinDays: 20, Rooms: 2, Plans: 1},
		Faults: Faults{LimiterOutage: [2]time.Duration{2 * time.Second, 6 * time.Second}},
		// The emulators' latencies (calibrate).
		DBLatency:      Latency{P50: 52 * time.Millisecond, P99: 170 * time.Millisecond},
		SQSLatency:     Latency{P50: 8 * time.Millisecond, P99: 40 * time.Millisecond},
		OTALatency:     Latency{P50: 2 * time.Millisecond, P99: 10 * time.Millisecond},
		MaxConcurrency: 2, Drain: 30 * time.Minute, SweepEvery: 5 * time.Minute, MemoryGB: 0.25,
		CheckItems: true, FinalSweep: true,
		Note: "8 properties on one credential, 200 changes in 8 s, local-share, the limiter's table out 2–6 s",
	}
}

// With on_store_unavailable local-share, an outage of the limiter's table
// while changes stream in does not stop the pushes: each process paces
// itself at rate ÷ N, where N counts every worker of both queues, and the
// vendor's window check sees the fleet stay within the published limit
// (burst + rate·(W + λ)) through the outage and after it. Nothing is lost:
// the OTA ends with the newest value of every date, nothing is
// dead-lettered.
func TestLocalShareKeepsPushingThroughALimiterOutage(t *testing.T) {
	seed := testSeed(t)
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		r, err := Run(t.Context(), localShareOutage(seed), nil)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		rep = r
	})
	var b strings.Builder
	rep.Write(&b)
	t.Log("\n" + b.String())
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
	if len(rep.DeadByReason) != 0 {
		fail("dead letters: %v, want none", rep.DeadByReason)
	}
	if rep.DB.Failed == 0 {
		fail("no call on the limiter's table failed: the outage tested nothing")
	}
	if rep.Stats.LocalShares == 0 {
		fail("no push was paced by the local share")
	}
	if rep.Stats.Changes < 150 || rep.Accepted < 16 {
		fail("%d changes, %d accepted pushes: too little happened", rep.Stats.Changes, rep.Accepted)
	}
}
