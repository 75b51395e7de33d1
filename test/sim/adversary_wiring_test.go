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
