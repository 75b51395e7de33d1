package cli

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

const leasesConfig = `{
  "channels": {
    "sm": {
      "base_url": "https://x.example/api",
      "endpoints": {
        "availability": {"path": "/ari", "meter": "ari", "limit": {"rate": 5, "burst": 5}, "max_in_flight": 3, "lease_hold": "30s"},
        "rates": {"path": "/ari", "meter": "ari", "limit": {"rate": 5, "burst": 5}, "max_in_flight": 3, "lease_hold": "30s"},
        "restrictions": {"path": "/s", "limit": {"rate": 5, "burst": 5}}
      },
      "credentials": {"c1": {"token_env": "T1"}, "c2": {"token_env": "T2"}}
    }
  }
}`

// Leases held by workers (taken here through the library, as the
// dispatcher does) are listed per (credential, meter) with their expiry;
// a free set shows none; endpoints sharing a meter show once.
func TestLeasesShowsWhatIsHeld(t *testing.T) {
	db := emulator.DynamoDB(t)
	table := emulator.NewTable(t, db)
	c := newCLI(t, map[string]string{"FLEETBUCKET_TABLE": table, "FLEETBUCKET_CONNECTIONS": writeFile(t, "c.json", leasesConfig)})
	worker, err := limiter.New(db, limiter.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	f := limiter.InFlight{Key: "sm#c1#ari", Max: 3, Hold: 30 * time.Second}
	var held []limiter.Lease
	for range 2 {
		l, err := worker.AcquireLease(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	text := c.run("leases", "sm").must(t)
	for _, want := range []string{"leases      sm#c1#ari", "held        2 of 3 (lease_hold 30s)", "leases      sm#c2#ari", "held        0 of 3",
		"slot " + strconv.Itoa(held[0].Slot), held[0].Owner, held[1].Owner} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "leases      ") != 2 {
		t.Errorf("want one set per (credential, meter), two in all:\n%s", text)
	}
	out := decode[struct {
		Leases []leaseSet `json:"leases"`
	}](t, c.run("leases", "sm", "c1", "rates", "--json").must(t))
	if len(out.Leases) != 1 || out.Leases[0].Key != "sm#c1#ari" || out.Leases[0].Max != 3 || len(out.Leases[0].Held) != 2 {
		t.Fatalf("--json = %+v, want sm#c1#ari with 2 of 3 held", out.Leases)
	}
	for _, h := range out.Leases[0].Held {
		var want limiter.Lease
		for _, l := range held {
			if l.Owner == h.Owner {
				want = l
			}
		}
		if want.Owner == "" || h.Slot != want.Slot || !h.Expires.Equal(want.Expires) || h.ExpiresInSeconds <= 0 || h.ExpiresInSeconds > 30 {
			t.Errorf("lease %+v, want %+v expiring within its 30 s hold", h, want)
		}
	}
	// Released, it is gone.
	if err := worker.ReleaseLease(context.Background(), held[0]); err != nil {
		t.Fatal(err)
	}
	if text := c.run("leases", "sm", "c1").must(t); !strings.Contains(text, "held        1 of 3") || strings.Contains(text, held[0].Owner) {
		t.Errorf("after a release:\n%s", text)
	}
	c.run("leases", "sm", "c1", "restrictions").fails(t, "sm restrictions sets no max_in_flight")
	c.run("leases", "sm", "c3").fails(t, `channel "sm" has no credential "c3"`)
	c.run("leases", "nope").fails(t, `unknown channel "nope"`)
}
