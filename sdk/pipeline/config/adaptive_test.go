package config

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

func TestAdaptiveDefaultsAndParse(t *testing.T) {
	c, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":8,"burst":8},"adaptive":{}}`)))
	if err != nil {
		t.Fatal(err)
	}
	want := limiter.Adaptive{MinRate: 0.5, Quiet: DefaultQuietSeconds * time.Second, Increase: 0.4}
	if got := c.Channels["bk"].Endpoints["rates"].AdaptiveLimit(); got == nil || *got != want {
		t.Fatalf("defaults: %+v, want %+v", got, want)
	}
	lim, err := c.Limits("bk", "rates")
	if err != nil {
		t.Fatal(err)
	}
	if b := lim.Buckets("bk#c1#rates", "p"); len(b) != 1 || b[0].Adaptive == nil || *b[0].Adaptive != want {
		t.Fatalf("Buckets = %+v, want the one bucket, adaptive", b)
	}

	c, err = Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":8,"burst":8},"adaptive":{"min_rate":1,"quiet_seconds":2.5,"increase":0.1}}`)))
	if err != nil {
		t.Fatal(err)
	}
	want = limiter.Adaptive{MinRate: 1, Quiet: 2500 * time.Millisecond, Increase: 0.1}
	if got := c.Channels["bk"].Endpoints["rates"].AdaptiveLimit(); *got != want {
		t.Fatalf("explicit: %+v, want %+v", got, want)
	}
	c, err = Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":8,"burst":8}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Channels["bk"].Endpoints["rates"].AdaptiveLimit(); got != nil {
		t.Fatalf("no adaptive setting: %+v, want nil (the limit stays fixed)", got)
	}
}

func TestThrottleSignalsDefaultsParseAndLookup(t *testing.T) {
	c, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":8,"burst":8},"throttle":{
		"statuses":[429,403],
		"headers":[{"preset":"ietf"},{"preset":"x-ratelimit","window_seconds":60},
		           {"remaining":"Rate-Limit-Minute-Remaining","unit":"percent"},
		           {"remaining":"EG-Rate-Limit-Remaining-Minute","limit":"EG-Rate-Limit-Minute","window_seconds":60}],
		"low_remaining":2,"low_percent":10}}`)))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.Signals("bk#c1#rates")
	if !ok || !s.Throttles(http.StatusForbidden) || s.LowRemaining != 2 || s.LowPercent != 10 || len(s.Headers) != 4 ||
		s.Headers[1].Window != time.Minute || s.Headers[2].Unit != otapush.UnitPercent {
		t.Fatalf("Signals = %+v, %v", s, ok)
	}
	if _, ok := c.Signals("bk#c1#availability"); ok {
		t.Error("a key of no configured endpoint has signals")
	}
	shared, err := Parse([]byte(`{"channels":{"bk":{"base_url":"https://x.example","endpoints":{
		"rates":{"path":"/b","limit":{"rate":8,"burst":8},"meter":"bxml","throttle":{"statuses":[429,403]}},
		"availability":{"path":"/b","limit":{"rate":8,"burst":8},"meter":"bxml","throttle":{"statuses":[429,403]}}},
		"credentials":{"c1":{"token_env":"T"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := shared.Signals("bk#c1#bxml"); !ok || !s.Throttles(403) {
		t.Errorf("a meter's key: %+v, %v; want its endpoints' signals", s, ok)
	}
	if _, err := Parse([]byte(`{"channels":{"bk":{"base_url":"https://x.example","endpoints":{
		"rates":{"path":"/b","limit":{"rate":8,"burst":8},"meter":"bxml","adaptive":{}},
		"availability":{"path":"/b","limit":{"rate":8,"burst":8},"meter":"bxml"}},
		"credentials":{"c1":{"token_env":"T"}}}}}`)); err == nil || !strings.Contains(err.Error(), "adaptive, throttle must match") {
		t.Errorf("endpoints sharing a meter, one adaptive: %v; want refused", err)
	}
	if _, ok := c.Signals("nonsense"); ok {
		t.Error("a malformed key has signals")
	}
	c, err = Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":8,"burst":8}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Signals("bk#c1#rates"); !s.Throttles(429) || s.Throttles(403) || s.LowRemaining != 1 || len(s.Headers) != 2 {
		t.Fatalf("defaults: %+v, want otapush.DefaultSignals", s)
	}
}

func TestAdaptiveAndThrottleRefusedWithPaths(t *testing.T) {
	const at = "channels.bk.endpoints.rates."
	tests := []struct {
		name, endpoint, want string
	}{
		{"min_rate above the rate", `"adaptive":{"min_rate":9}`, at + "adaptive.min_rate: 9, want > 0 and at most the limit's rate 8"},
		{"negative min_rate", `"adaptive":{"min_rate":-1}`, at + "adaptive.min_rate: -1"},
		{"negative quiet", `"adaptive":{"quiet_seconds":-1}`, at + "adaptive.quiet_seconds: -1"},
		{"negative increase", `"adaptive":{"increase":-0.5}`, at + "adaptive.increase: -0.5"},
		{"with shards", `"adaptive":{},"shards":2`, at + "adaptive: cannot be combined"},
		{"with a per-minute window", `"adaptive":{},"limits":[{"per_minute":60,"burst":60}]`, at + "adaptive: cannot be combined"},
		{"401 as a throttle", `"throttle":{"statuses":[401]}`, at + "throttle.statuses: 401"},
		{"an unknown preset", `"throttle":{"headers":[{"preset":"ietf-draft-3"}]}`, at + `throttle.headers[0]: preset "ietf-draft-3"`},
		{"a limit without its window", `"throttle":{"headers":[{"limit":"X-Quota"}]}`, at + `throttle.headers[0]: limit "X-Quota" needs window_seconds`},
		{"a bad unit", `"throttle":{"headers":[{"remaining":"X-Left","unit":"ratio"}]}`, at + `throttle.headers[0]: unit: "ratio"`},
		{"low_percent 100", `"throttle":{"low_percent":100}`, at + "throttle.low_percent: 100"},
		{"an unknown field", `"throttle":{"status":[429]}`, `unknown field "status"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":8,"burst":8},` + tt.endpoint + `}`)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}
