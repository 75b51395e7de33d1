package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// Rates (normal) and availability (urgent) share one meter with 4 of its
// burst of 8 kept for urgent pushes: however many normal pushes contend,
// they take at most 4 tokens at an instant, and 4 urgent ones then find a
// token at once. A fixed clock makes the bucket's arithmetic exact.
func TestUrgentPushesFindTheirReserve(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"channels":{"bk":{"base_url":"https://x.example","endpoints":{
  "rates":        {"path":"/ari","meter":"ari","limit":{"rate":4,"burst":8},"urgent_reserve":4},
  "availability": {"path":"/ari","meter":"ari","limit":{"rate":4,"burst":8},"urgent_reserve":4,"priority":"urgent"}},
  "credentials":{"c1":{"token_env":"T"}}}},
  "properties":{"h1":[{"channel":"bk","credential":"c1","hotel_ref":"BK-1"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	sy := &syncer.Syncer{Config: cfg, Token: func(string) string { return "tok" }}
	route := func(kind string) dispatch.Route {
		r, err := sy.Route(job.Job{ID: "j", Channel: "bk", Credential: "c1", Endpoint: kind, Payload: []byte(`{"property_id":"h1"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	normal, urgent := route("rates"), route("availability")
	if normal.Bucket.Key != urgent.Bucket.Key || normal.Bucket.Key != "bk#c1#ari" {
		t.Fatalf("bucket keys %q and %q, want both bk#c1#ari", normal.Bucket.Key, urgent.Bucket.Key)
	}
	if normal.Bucket.Limit.Burst != 4 || urgent.Bucket.Limit.Burst != 8 || normal.Horizon <= 0 || urgent.Horizon != 0 {
		t.Fatalf("normal burst %d horizon %v, urgent burst %d horizon %v; want 4 with a horizon, and 8 without",
			normal.Bucket.Limit.Burst, normal.Horizon, urgent.Bucket.Limit.Burst, urgent.Horizon)
	}

	// A lingering normal lane books as the dispatcher's lingerSlot does:
	// one token of the bucket taken with burst 1, at most (4−1)·T plus the
	// horizon ahead, so its slots queue while tat stays within the share.
	lingering := normal
	lingering.Bucket.Limit.Burst = 1
	lingerReach := 3*250*time.Millisecond + normal.Horizon

	t0 := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	db := emulator.DynamoDB(t)
	lim, err := limiter.New(db, limiter.WithTable(emulator.NewTable(t, db)), limiter.WithClock(func() time.Time { return now }), limiter.WithDenialCacheAge(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	take := func(r dispatch.Route, maxDelay time.Duration) (slots []time.Duration) {
		for range 20 {
			res, err := lim.Reserve(ctx, r.Bucket, 1, maxDelay)
			if _, denied := limiter.RetryAfter(err); denied {
				return slots
			}
			if err != nil {
				t.Fatal(err)
			}
			slots = append(slots, res.Slot.Sub(t0))
		}
		return slots
	}
	tests := []struct {
		name     string
		at       time.Duration
		r        dispatch.Route
		maxDelay time.Duration
		want     string // the slots granted, after t0
	}{
		{"a normal backlog takes all but the reserve", 0, normal, normal.Horizon, "[0s 0s 0s 0s]"},
		{"urgent pushes find the reserve at once, then queue", 0, urgent, 2 * time.Second, "[0s 0s 0s 0s 250ms 500ms 750ms 1s 1.25s 1.5s 1.75s 2s]"},
		{"normal ones wait until the bucket is back below their share", 2 * time.Second, normal, normal.Horizon, "[]"},
		{"and then take the rate", 3250 * time.Millisecond, normal, normal.Horizon, "[3.25s]"},
		{"lingering normal lanes book their share, one interval apart", 10 * time.Second, lingering, lingerReach, "[10s 10.25s 10.5s 10.75s]"},
		{"and urgent pushes still find the reserve at once", 10 * time.Second, urgent, 0, "[10s 10s 10s 10s]"},
	}
	for _, tt := range tests {
		now = t0.Add(tt.at)
		if got := fmt.Sprint(take(tt.r, tt.maxDelay)); got != tt.want {
			t.Errorf("%s: slots %s, want %s", tt.name, got, tt.want)
		}
	}
}
