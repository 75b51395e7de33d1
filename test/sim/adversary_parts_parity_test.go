package sim

import (
	"maps"
	"strings"
	"testing"
	"testing/synctest"
	"time"
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

// TestLateEdits: a day edited after its property's last check began
// reading, or on a property never checked, may stay edited; one edited
// before it may not, whatever edits of the day came before.
func TestLateEdits(t *testing.T) {
	t0 := epoch
	row := rowKey{prop: 1, kind: 1, room: 2}
	other := rowKey{prop: 2, kind: 0}
	read := map[int32]time.Time{1: t0.Add(30 * time.Second)}
	day := func(k rowKey, d int) wireDay { bk, i := at(k, d); return wireDay{bk, i} }
	for _, tt := range []struct {
		name  string
		edits []edit
		want  map[wireDay]int32
	}{
		{"before the read", []edit{{k: row, day: 3, val: 7, at: t0.Add(10 * time.Second)}}, map[wireDay]int32{}},
		{"after the read", []edit{{k: row, day: 40, val: 7, at: t0.Add(31 * time.Second)}}, map[wireDay]int32{day(row, 40): 7}},
		{"at the read's start", []edit{{k: row, day: 3, val: 7, at: t0.Add(30 * time.Second)}}, map[wireDay]int32{}},
		{"never checked", []edit{{k: other, day: 3, val: 9, at: t0}}, map[wireDay]int32{day(other, 3): 9}},
		{"edited again after the read", []edit{{k: row, day: 3, val: 7, at: t0.Add(time.Second)}, {k: row, day: 3, val: 8, at: t0.Add(40 * time.Second)}},
			map[wireDay]int32{day(row, 3): 8}},
		{"the last edit before the read", []edit{{k: row, day: 3, val: 7, at: t0.Add(time.Second)}, {k: row, day: 3, val: 8, at: t0.Add(20 * time.Second)}},
			map[wireDay]int32{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := lateEdits(tt.edits, read); !maps.Equal(got, tt.want) {
				t.Errorf("lateEdits = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestParityGap: checks come every Every while the load runs and for
// Every after it, then as far apart as the load is behind, up to an hour
// (never closer than Every).
func TestParityGap(t *testing.T) {
	for _, tt := range []struct {
		every, afterLoad, want time.Duration
	}{
		{20 * time.Second, -time.Minute, 20 * time.Second},
		{20 * time.Second, 0, 20 * time.Second},
		{20 * time.Second, 15 * time.Second, 20 * time.Second},
		{20 * time.Second, 25 * time.Second, 25 * time.Second},
		{3 * time.Minute, 10 * time.Minute, 10 * time.Minute},
		{20 * time.Second, 59 * time.Minute, 59 * time.Minute},
		{20 * time.Second, 5 * time.Hour, time.Hour},
		{2 * time.Hour, 5 * time.Hour, 2 * time.Hour},
	} {
		if got := parityGap(tt.every, tt.afterLoad); got != tt.want {
			t.Errorf("parityGap(%v, %v) = %v, want %v", tt.every, tt.afterLoad, got, tt.want)
		}
	}
}
