package sim

import (
	"testing"
	"time"
)

// The drain ends only once no lane is left to the sweep, however fresh
// the OTA is. For the run's first 20 minutes the vendor applies every
// push and answers none within the 2 s push budget, so the lane's job
// fails every push, gives up after DefaultPolicy's failures and leaves
// its lane to the sweep while the OTA already holds every change. A drain
// that ended on the ledger's freshness alone stopped there, and the final
// sweep found the lane: adversary seed 63 did so in 1 run of 8 to 10 (its
// pinned case), this case every time. The sweep of minute 30 pushes the
// lane once the vendor answers again.
func TestDrainWaitsForALaneLeftToTheSweep(t *testing.T) {
	sc := oneProperty("late-answers", "one lane whose pushes the vendor applies and answers past their budget for 20 minutes")
	sc.Channels[0].Vendor.LateSpan = [2]time.Duration{0, 20 * time.Minute}
	sc.Load.Duration = 3 * time.Second
	sc.Drain, sc.SweepEvery, sc.FinalSweep = time.Hour, 30*time.Minute, true
	sc.Top = map[string]string{"push_timeout": `"2s"`}
	rep := runChecked(t, sc, nil)
	if rep.Stats.SweptLanes == 0 {
		t.Errorf("no sweep took a lane over (%d sweeps): the lane was never left to the sweep, so the drain's wait tested nothing", rep.Stats.Sweeps)
	}
}
