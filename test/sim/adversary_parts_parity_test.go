package sim

import (
	"strings"
	"testing"
	"testing/synctest"
)

// runParity runs c's scenario, its parity checks repairing or not.
func runParity(t *testing.T, c Case, repair bool) *Report {
	t.Helper()
	sc, _, _, err := c.Build()
	if err != nil {
		t.Fatal(err)
	}
	if sc.Parity == nil {
		t.Fatalf("%s draws no parity schedule", c.Replay())
	}
	p := *sc.Parity
	p.NoRepair = !repair
	sc.Parity = &p
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		r, err := Run(t.Context(), sc, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.Replay(), err)
		}
		rep = r
	})
	return rep
}

// TestAdversaryPinnedParity: hoteliers edit an OTA's copy by hand while
// the load runs and parity checks run every 20 s. With the checks'
// repairs every edited day is newest at the OTA at the end (the ledger's
// stale check, no exemption used); the same case checking without
// repairing leaves the edits stale, so the oracle sees them.
func TestAdversaryPinnedParity(t *testing.T) {
	for _, c := range []Case{
		// expedia-ar at 5 reads/s, burst 2, 10-day reads; 20 edits.
		{Seed: 64, Parts: []string{"parity"}},
		// A channel given expedia-ar by the part, a third credential's
		// read bucket, 1 read/s burst 1 over 31-day reads; 20 edits.
		{Seed: 61, Parts: []string{"parity"}},
	} {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel()
			rep := runParity(t, c, true)
			if v := verdict(rep); v != "" {
				t.Fatalf("replay: %s\n%s", c.Replay(), v)
			}
			p := rep.Parity
			t.Logf("parity: %s", p)
			if p.Edits == 0 || p.Edits == p.Late || p.Drifted == 0 || p.Repairs == 0 || p.Failed > 0 || p.LateHeld > 0 {
				t.Errorf("want hand edits a check saw, drift found and repaired, no check failed, none exempt; got %s", p)
			}
			ctl := runParity(t, c, false)
			if v := verdict(ctl); !strings.Contains(v, "stale:") {
				t.Errorf("checks that do not repair: want the edits stale at the end, got verdict %q; parity: %s", v, ctl.Parity)
			}
		})
	}
}
