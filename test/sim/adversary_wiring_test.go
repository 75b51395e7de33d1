package sim

import (
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
				// touch writes values from 1000 on; the load, at most 500.
				if !strings.Contains(v, "stale: ") || !strings.Contains(v, "PMS newest 10") {
					t.Fatalf("%s: want the touched days stale, got violations %q", tc.c.Replay(), v)
				}
			})
		})
	}
}
