package sim

import (
	"math/rand/v2"
	"time"
)

// Deaths of the deferred queue's invocations: for a stretch from a moment
// of the load, every invocation that takes up deferred messages dies a
// while after it began, having deleted nothing. A lane job then comes
// back on each receive its visibility timeout allows, and on its last one
// hands its lane to the sweep (docs/design.md: the queue's redrive never
// takes a lane job); TestALaneJobKilledOnEveryReceiveStillReachesTheOTA
// plays it alone. The part comes after every other (adversary_whole_resync.go
// appends it), so a seed draws every earlier part as before it. What
// the deaths cost a lane the drain grants as it grants the lambda-deaths
// part's (deaths.go).
var deathParts = []part{
	{"deferred-deaths", "fault", func(b *build, r *rand.Rand) ([]string, string) {
		f := &b.sc.Faults
		// 2 minutes kills a job once or twice; 45, past the five receives
		// of a 6-minute visibility, on every receive it has.
		f.DeferredDeaths = span(b, r, 2*time.Minute, 10*time.Minute, 45*time.Minute)
		// Before the invocation's first write can land (50 ms, beside a
		// slow store), within a push, or after one. A death before the
		// last receive's hand-over leaves the message to SQS's redrive
		// with no reason; the lane reaches the sweep all the same, listed
		// at its lease's end by the write that deferred the job
		// (lane.Store.Renew, ClaimAfter; seed 3 with deaths 50 ms in
		// beside a slow store, 14-156 days stale before).
		f.DeferredDeathAfter = oneOf(r, 50*time.Millisecond, time.Second, 5*time.Second)
		return []string{"fault.deferred_deaths=" + (f.DeferredDeaths[1] - f.DeferredDeaths[0]).String(),
			"fault.deferred_death_after=" + f.DeferredDeathAfter.String()}, ""
	}},
}
