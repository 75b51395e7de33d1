package sim

import (
	"strings"
	"testing"
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
// reached the OTA (adversary seed 44). Since a claim lists its lane for
// the sweep at its lease's end (lane.Store.ClaimAfter), the sweep takes the
// lane from the first receive's dead claim once that lease is over, before
// the job's next receive, which then finds the lane another's: either way
// the sweep is what pushes it.
func TestALaneJobKilledOnEveryReceiveStillReachesTheOTA(t *testing.T) {
	sc := oneProperty("killed-every-receive", "one lane; the vendor hangs 30 min; every deferred-queue invocation dies 1 s in for 45 min")
	sc.Channels[0].Vendor.HangSpan = [2]time.Duration{0, 30 * time.Minute}
	sc.Faults = Faults{DeferredDeaths: [2]time.Duration{0, 45 * time.Minute}, DeferredDeathAfter: time.Second}
	sc.DBLatency = Latency{P50: 5 * time.Millisecond, P99: 20 * time.Millisecond}
	sc.Drain = 3 * time.Hour
	rep := runChecked(t, sc, nil)
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
	if rep.Stats.SweptLanes == 0 {
		t.Errorf("%d jobs handed their lane over on their last receive, the sweep took %d lanes (dead letters %v): the case tested nothing",
			handed, rep.Stats.SweptLanes, rep.DeadByReason)
	}
	if rep.Stats.Deaths < maxReceiveCount-1 {
		t.Errorf("%d invocations died, want the job's first %d receives at least", rep.Stats.Deaths, maxReceiveCount-1)
	}
}

// As above, but every deferred-queue invocation dies 50 ms in, beside a
// store answering in some 278 ms: no receive of the job writes anything,
// the last one's hand-over included, so SQS's redrive takes its message
// with no reason of the worker's. The deferral that sent the job listed
// its lane for the sweep at the lease's end, and the sweep pushes it once
// the vendor answers (adversary seed 3 with deferred-deaths 50 ms in: 31
// lane jobs redriven, 14-156 days stale).
func TestALaneJobKilled50msIntoEveryReceiveStillReachesTheOTA(t *testing.T) {
	sc := oneProperty("killed-50ms-into-every-receive", "one lane; the vendor hangs 30 min; every deferred-queue invocation dies 50 ms in for 45 min, the store answering in ~278 ms")
	sc.Channels[0].Vendor.HangSpan = [2]time.Duration{0, 30 * time.Minute}
	sc.Faults = Faults{DeferredDeaths: [2]time.Duration{0, 45 * time.Minute}, DeferredDeathAfter: 50 * time.Millisecond}
	sc.DBLatency = Latency{P50: 278 * time.Millisecond, P99: 400 * time.Millisecond}
	sc.Drain = 3 * time.Hour
	rep := runChecked(t, sc, nil)
	if rep.Stale != 0 {
		t.Errorf("%d dates stale at the OTA: %v", rep.Stale, rep.StaleExamples)
	}
	if rep.Stats.SweptLanes == 0 {
		t.Errorf("the sweep took no lane (dead letters %v): the case tested nothing", rep.DeadByReason)
	}
	if rep.Stats.Deaths < maxReceiveCount {
		t.Errorf("%d invocations died, want the job's %d receives at least", rep.Stats.Deaths, maxReceiveCount)
	}
}
