package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// The sync pipeline honours an endpoint's extra window and per-property
// share from the connections config: every push draws from all of its
// buckets in one transaction, a property past its share waits while
// another property's push goes through, and the credential's per-minute
// window stops everyone.
func TestSyncHonoursWindowsAndPropertyShares(t *testing.T) {
	lim := limiter.PerSecond(20, 20)
	p := newPipeline(t, lim, mockota.Config{Limit: lim})
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{
  "channels": {"booking_com": {
    "base_url": %q, "allow_http": true,
    "endpoints": {"rates": {"path": "/v1/rates", "limit": {"rate": 20, "burst": 20},
      "limits": [{"per_minute": 6, "burst": 4}],
      "property_share": {"rate": 0.05, "burst": 2}, "margin": "0s"}},
    "credentials": {"cred-1": {"token_env": "T"}}
  }},
  "properties": {
    "hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1"}],
    "hotel-borealis": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-2"}]
  }}`, p.ota.URL())))
	if err != nil {
		t.Fatal(err)
	}
	db := emulator.DynamoDB(t)
	stateTable := emulator.NewStateTable(t, db)
	sy := &syncer.Syncer{Config: cfg, State: &ari.Store{DB: db, Table: stateTable}, Lanes: &lane.Store{DB: db, Table: stateTable},
		Token: func(string) string { return "tok" }, Linger: -1}
	d := p.dispatcher(workerOpts{})
	if err := handTo(sy, d); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	send := func(id, property string, day int) dispatch.Outcome {
		t.Helper()
		body := changeEvent(id, int64(day), "rates", fmt.Sprintf("2026-12-%02d", day), fmt.Sprintf("2026-12-%02d", day), map[string]any{"amount": day})
		body = replaceProperty(body, property)
		rep, err := sy.HandleChange(ctx, body)
		if err != nil || len(rep.Results) != 1 {
			t.Fatalf("event %s: %+v %v", id, rep, err)
		}
		return rep.Results[0].Outcome
	}
	steps := []struct {
		id, property string
		want         dispatch.Outcome
	}{
		{"a1", "hotel-aurora", dispatch.Pushed},
		{"a2", "hotel-aurora", dispatch.Pushed},   // the share's burst of 2
		{"a3", "hotel-aurora", dispatch.Deferred}, // past its share: deferred without a slot, nothing charged
		{"b1", "hotel-borealis", dispatch.Pushed}, // another property is not held up
		{"b2", "hotel-borealis", dispatch.Pushed},
		// The per-minute window's burst of 4 is spent: a1, a2, b1, b2.
		{"b3", "hotel-borealis", dispatch.Deferred},
	}
	for i, s := range steps {
		if got := send(s.id, s.property, i+1); got != s.want {
			t.Fatalf("step %d (%s for %s): %s, want %s", i, s.id, s.property, got, s.want)
		}
	}
	lim0, err := limiter.New(db, limiter.WithTable(p.table))
	if err != nil {
		t.Fatal(err)
	}
	window, err := lim0.State(ctx, limiter.Bucket{Key: "booking_com#cred-1#rates#w0", Limit: limiter.PerMinute(6, 4)})
	if err != nil || window.Tokens != 0 {
		t.Fatalf("per-minute window after 4 pushes: %+v %v, want empty", window, err)
	}
	if n := len(p.ota.Accepted()); n != 4 {
		t.Fatalf("the OTA accepted %d pushes, want 4", n)
	}
}

func replaceProperty(body, property string) string {
	return strings.Replace(body, `"property_id":"hotel-aurora"`, `"property_id":"`+property+`"`, 1)
}
