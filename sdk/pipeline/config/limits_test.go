package config

import (
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// config wraps one endpoint of channel bk, endpoint rates.
func config(endpoint string) string {
	return `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":` + endpoint +
		`},"credentials":{"c1":{"token_env":"T"}}}},"properties":{"h1":[{"channel":"bk","credential":"c1","hotel_ref":"R"}]}}`
}

func TestEndpointLimitsParse(t *testing.T) {
	c, err := Parse([]byte(config(`{"path":"/r","limit":{"rate":10,"burst":10},
		"limits":[{"per_minute":300,"burst":300},{"rate":5,"burst":20}],"property_share":{"rate":1,"burst":2}}`)))
	if err != nil {
		t.Fatal(err)
	}
	el, err := c.Limits("bk", "rates")
	if err != nil {
		t.Fatal(err)
	}
	got := el.Buckets("bk#c1#rates", "h1")
	// Every bucket keeps the endpoint's margin (the default here).
	m := func(l limiter.Limit) limiter.Limit { l.Margin = DefaultMargin; return l }
	want := []limiter.Bucket{
		{Key: "bk#c1#rates", Limit: m(limiter.PerSecond(10, 10))},
		{Key: "bk#c1#rates#w0", Limit: m(limiter.PerMinute(300, 300))},
		{Key: "bk#c1#rates#w1", Limit: m(limiter.PerSecond(5, 20))},
		{Key: "bk#c1#rates#p#h1", Limit: m(limiter.PerSecond(1, 2))},
	}
	if len(got) != len(want) {
		t.Fatalf("Buckets = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bucket %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := limiter.CheckMulti(got, 1, 0); err != nil {
		t.Fatalf("the buckets are not a valid multi request: %v", err)
	}
	if s := el.Sharded("k"); s.Shards != 1 {
		t.Fatalf("unsharded endpoint has %d shards, want 1", s.Shards)
	}

	c, err = Parse([]byte(config(`{"path":"/r","limit":{"rate":400,"burst":200},"shards":4}`)))
	if err != nil {
		t.Fatal(err)
	}
	el, _ = c.Limits("bk", "rates")
	if s := el.Sharded("k"); s.Shards != 4 || s.Validate() != nil {
		t.Fatalf("Sharded = %+v (%v)", s, s.Validate())
	}
	if _, err := c.Limits("bk", "photos"); err == nil {
		t.Fatal("Limits of an unknown endpoint succeeded")
	}
}

func TestEndpointLimitsRefused(t *testing.T) {
	tests := []struct {
		name, endpoint, want string
	}{
		{"per-minute looser than per-second", `{"path":"/r","limit":{"rate":10,"burst":10},"limits":[{"per_minute":900,"burst":900}]}`,
			"channels.bk.endpoints.rates.limits[0].per_minute: 900 per minute is 15/s, above limit.rate 10/s"},
		{"both rate and per_minute", `{"path":"/r","limit":{"rate":10,"burst":10},"limits":[{"rate":5,"per_minute":60,"burst":5}]}`,
			"channels.bk.endpoints.rates.limits[0]: both rate and per_minute"},
		{"neither", `{"path":"/r","limit":{"rate":10,"burst":10},"limits":[{"burst":5}]}`,
			"channels.bk.endpoints.rates.limits[0]: neither rate nor per_minute"},
		{"extra limit zero burst", `{"path":"/r","limit":{"rate":10,"burst":10},"limits":[{"per_minute":60,"burst":0}]}`,
			"channels.bk.endpoints.rates.limits[0]: invalid limit.burst: 0"},
		{"negative per minute", `{"path":"/r","limit":{"rate":10,"burst":10},"limits":[{"per_minute":-6,"burst":3}]}`,
			"channels.bk.endpoints.rates.limits[0].per_minute: -6 per minute is refused"},
		{"per-second extra never binds", `{"path":"/r","limit":{"rate":10,"burst":10},"limits":[{"rate":20,"burst":10}]}`,
			"channels.bk.endpoints.rates.limits[0]: rate 20 burst 10 is no tighter than limit"},
		{"zero shards", `{"path":"/r","limit":{"rate":10,"burst":10},"shards":0}`,
			"channels.bk.endpoints.rates.shards: 0, want ≥ 1"},
		{"negative shards", `{"path":"/r","limit":{"rate":10,"burst":10},"shards":-3}`,
			"channels.bk.endpoints.rates.shards: -3, want ≥ 1"},
		{"burst per shard below 1", `{"path":"/r","limit":{"rate":10,"burst":3},"shards":4}`,
			"channels.bk.endpoints.rates.shards: invalid shards: 4 shards of burst 3 leave a shard with no token"},
		{"shard rate rounds away", `{"path":"/r","limit":{"rate":900000,"burst":1000},"shards":2}`,
			"channels.bk.endpoints.rates.shards: invalid shards: 2 shards of rate 900000: each shard's interval rounds to 3µs"},
		{"shards with limits", `{"path":"/r","limit":{"rate":10,"burst":10},"shards":2,"limits":[{"per_minute":300,"burst":300}]}`,
			"channels.bk.endpoints.rates.shards: 2 shards cannot be combined with limits or property_share"},
		{"share larger than the whole", `{"path":"/r","limit":{"rate":10,"burst":10},"property_share":{"rate":20,"burst":2}}`,
			"channels.bk.endpoints.rates.property_share: rate 20 burst 2 exceeds limit"},
		{"share invalid", `{"path":"/r","limit":{"rate":10,"burst":10},"property_share":{"rate":1,"burst":0}}`,
			"channels.bk.endpoints.rates.property_share: invalid limit.burst: 0"},
		{"too many buckets", `{"path":"/r","limit":{"rate":10,"burst":10},"limits":[` + strings.TrimSuffix(strings.Repeat(`{"per_minute":60,"burst":5},`, 100), ",") + `]}`,
			"channels.bk.endpoints.rates.limits: 101 buckets with limit and property_share, at most 100"},
		{"unknown field", `{"path":"/r","limit":{"rate":10,"burst":10},"shard":2}`, `unknown field "shard"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(config(tt.endpoint)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
