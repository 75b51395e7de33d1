package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSlowestKeepsTheSlowestLanesOfEachMinute(t *testing.T) {
	day := func(ch int, prop int32, took, acceptedAt time.Duration) slowDay {
		return slowDay{ch: ch, prop: prop, published: acceptedAt - took, accepted: acceptedAt}
	}
	for _, c := range []struct {
		name string
		in   []slowDay
		want []time.Duration // what the kept days took, slowest first, minute by minute
	}{
		{"fewer than the minute keeps", []slowDay{day(0, 1, 30*time.Second, 10*time.Second), day(0, 2, time.Minute, 20*time.Second)},
			[]time.Duration{time.Minute, 30 * time.Second}},
		{"the fastest gives way", []slowDay{
			day(0, 1, 21*time.Second, time.Second), day(0, 2, 22*time.Second, time.Second), day(0, 3, 23*time.Second, time.Second),
			day(0, 4, 24*time.Second, time.Second), day(0, 5, 25*time.Second, time.Second), day(0, 6, 20500*time.Millisecond, time.Second)},
			[]time.Duration{25 * time.Second, 24 * time.Second, 23 * time.Second, 22 * time.Second}},
		{"one day per lane and channel, its slowest", []slowDay{
			day(0, 1, 30*time.Second, time.Second), day(0, 1, 40*time.Second, 2*time.Second), day(0, 1, 35*time.Second, 3*time.Second),
			day(1, 1, 31*time.Second, 4*time.Second)},
			[]time.Duration{40 * time.Second, 31 * time.Second}},
		{"by the minute the OTA got it", []slowDay{day(0, 1, 5*time.Minute, 90*time.Second), day(0, 1, 30*time.Second, 30*time.Second)},
			[]time.Duration{30 * time.Second, 5 * time.Minute}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s slowest
			for _, d := range c.in {
				s.add(d)
			}
			var got []time.Duration
			for _, d := range s.all() {
				got = append(got, d.accepted-d.published)
			}
			if len(got) != len(c.want) {
				t.Fatalf("kept %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("kept %v, want %v", got, c.want)
				}
			}
		})
	}
}

// TestLaneTrace runs the small faults scenario with the lane trace on: the
// trace names slow days and follows their lanes, and the run still keeps
// every invariant (the trace only observes).
func TestLaneTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lanes.trace")
	t.Setenv("FLEETBUCKET_SIM_LANE_TRACE", path)
	runScenario(t, "faults", Small, 1, nil)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var slow, changes, queued, writes, results int
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 2 && f[0] == "SLOW":
			slow++
		case len(f) > 3 && f[2] == "C":
			changes++
		case len(f) > 3 && f[2] == "Q" && f[len(f)-1] == "change":
			queued++
		case len(f) > 3 && f[2] == "L":
			writes++
		case len(f) > 3 && f[2] == "J":
			results++
		}
	}
	if slow == 0 || changes == 0 || queued == 0 || writes == 0 || results == 0 {
		t.Errorf("trace has %d slow days, %d changes, %d changes queued, %d lane writes, %d job results: want some of each", slow, changes, queued, writes, results)
	}
}
