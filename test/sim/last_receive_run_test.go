package sim

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The whole simulation, one lane: for its first 30 minutes the vendor
// answers nothing (each push runs to its budget), and for 45 every
// invocation of the deferred queue dies a second in, past the hand-over
// and before any hung push ends. The change's first push (the changes
// queue's, which lives) fails and defers its lane's job, whose message is
// then killed on every receive the redrive policy allows, 6 minutes
// apart. On its last receive the job dead-letters itself with the reason
// and hands the lane to the sweep, which pushes it once the vendor
// answers; no message is left to SQS's redrive. Before, the redrive moved
// it with no reason, the lane owned and unlisted, and the change never
// reached the OTA (adversary seed 44).
func TestALaneJobKilledOnEveryReceiveStillReachesTheOTA(t *testing.T) {
	sc := Scenario{
		Name: "killed-every-receive", Seed: 1, Properties: 1,
		Channels: []ChannelSpec{{Name: "booking_com", Kinds: []string{"availability"}, Creds: 1, Rate: 5, Burst: 5,
			Vendor: VendorSpec{HangSpan: [2]time.Duration{0, 30 * time.Minute}}}},
		Load: Load{Duration: 2 * time.Second, Rate: func(time.Duration) float64 { return 1 }, Kinds: [3]float64{1, 0, 0},
			MaxDays: 3, WithinDays: 20, Rooms: 1, Plans: 1},
		Faults:         Faults{DeferredDeaths: [2]time.Duration{0, 45 * time.Minute}, DeferredDeathAfter: time.Second},
		DBLatency:      Latency{P50: 5 * time.Millisecond, P99: 20 * time.Millisecond},
		SQSLatency:     Latency{P50: 8 * time.Millisecond, P99: 40 * time.Millisecond},
		OTALatency:     Latency{P50: 2 * time.Millisecond, P99: 10 * time.Millisecond},
		MaxConcurrency: 1, Drain: 3 * time.Hour, SweepEvery: 5 * time.Minute, MemoryGB: 0.25,
		CheckItems: true,
		Note:       "one lane; the vendor hangs 30 min; every deferred-queue invocation dies 1 s in for 45 min",
	}
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		r, err := Run(t.Context(), sc, nil)
		if err != nil {
			t.Fatal(err)
		}
		rep = r
	})
	var b strings.Builder
	rep.Write(&b)
	t.Log("\n" + b.String())
	for _, v := range rep.Violations {
		t.Error(v)
	}
	if rep.Stale != 0 {
		t.Errorf("%d dates stale at the OTA: %v", rep.Stale, rep.StaleExamples)
	}
	handed := 0
	for reason, n := range rep.DeadByReason {
		switch {
		case strings.HasPrefix(reason, "redrive:"):
			t.Errorf("%d messages moved by the redrive, with no reason of the worker's: %q", n, reason)
		case strings.HasPrefix(reason, "last receive"):
			handed += n
		}
	}
	if handed == 0 || rep.Stats.SweptLanes == 0 {
		t.Errorf("%d jobs handed their lane over on their last receive, the sweep took %d lanes (dead letters %v): the case tested nothing",
			handed, rep.Stats.SweptLanes, rep.DeadByReason)
	}
	if rep.Stats.Deaths < maxReceiveCount-1 {
		t.Errorf("%d invocations died, want the job's first %d receives at least", rep.Stats.Deaths, maxReceiveCount-1)
	}
}
