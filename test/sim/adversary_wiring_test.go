package sim

import (
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
)

// TestConnectionsOracleCatchesWhatAWriteLost plays the adversary's
// connection cases with the operator's last write lost (the enable, or
// the mapping put back): the PMS's changes after it are never delivered,
// and the end invariant must say so. With every write played the same
// cases pass (TestAdversary runs them among its seeds).
func TestConnectionsOracleCatchesWhatAWriteLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Case
		lose func(ConnEvent) bool
	}{
		{"enable lost", Case{Seed: 11, Parts: []string{"disconnect"}}, func(e ConnEvent) bool { return e.Enable }},
		{"mapping put back lost", Case{Seed: 3, Parts: []string{"remap"}}, func(e ConnEvent) bool { return e.Remap && e.UnmappedCode == "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, _, _, err := tc.c.Build()
			if err != nil {
				t.Fatal(err)
			}
			sc.playConn = func(e ConnEvent) bool { return !tc.lose(e) }
			synctest.Test(t, func(t *testing.T) {
				rep, err := Run(t.Context(), sc, nil)
				if err != nil {
					t.Fatal(err)
				}
				v := strings.Join(rep.Violations, "\n")
				// touch writes 400 + 10·room + plan to the first week.
				if !touched.MatchString(v) {
					t.Fatalf("%s: want the touched days stale, got violations %q", tc.c.Replay(), v)
				}
			})
		})
	}
}

var touched = regexp.MustCompile(`stale: .*2027-01-0[1-7]: OTA holds \d+ \(seq \d+\), PMS newest 4[0-4]\d `)

// A remap leaves out the one code it means to, and maps every other code
// the case sends: a bulk upload's rooms beyond the load's included (seed
// 939: the writes named the load's DBL alone, so a bulk upload's TWN was
// unmapped from the first write to the end of the run, and its 300 days
// went stale with no excuse the oracle could give).
func TestRemapMapsEveryCodeTheCaseSends(t *testing.T) {
	sc, _, _, err := Case{Seed: 939, Parts: []string{"bulk-lane", "remap"}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Bulks) == 0 {
		t.Fatal("the case draws no bulk upload")
	}
	for _, e := range sc.ConnEvents {
		if !e.Remap {
			continue
		}
		for _, bk := range sc.Bulks {
			for _, room := range roomNames[:bk.Rooms] {
				if _, ok := e.RoomTypes[room]; !ok && room != e.UnmappedCode {
					t.Errorf("the remap at %v leaves %s unmapped, which the bulk upload sends (unmapping %q on purpose)", e.At, room, e.UnmappedCode)
				}
			}
		}
	}
}
