package config

import (
	"strings"
	"testing"
)

func TestExampleConfigLoads(t *testing.T) {
	c, err := Load("../../../config/connections.example.json")
	if err != nil {
		t.Fatal(err)
	}
	ts, ok := c.Targets("hotel-aurora", "restrictions")
	if !ok || len(ts) != 1 || ts[0].Channel != "booking_com" || ts[0].HotelRef != "BK-1001" {
		t.Fatalf("Targets(hotel-aurora, restrictions) = %+v, %v; want booking_com only (expedia has no restrictions endpoint)", ts, ok)
	}
	if _, ok := c.Targets("hotel-nowhere", "rates"); ok {
		t.Fatal("an unknown property has targets")
	}
	url, lim, err := c.Endpoint("expedia", "rates")
	if err != nil || url != "https://services.expedia.example/eqc/v1/rates" || lim.Rate != 8 || lim.Burst != 8 {
		t.Fatalf("Endpoint = %q %+v %v", url, lim, err)
	}
	if items, bytes := c.Channels["expedia"].Endpoints["rates"].RequestLimits(); items != DefaultMaxItems || bytes != DefaultMaxBytes {
		t.Fatalf("RequestLimits = %d, %d; want the defaults", items, bytes)
	}
	// 10+5+5 for booking, 8+8 for expedia: 36 req/s × 0.2 s.
	if got := c.MaxConcurrency(); got != 8 {
		t.Fatalf("MaxConcurrency = %d, want 8", got)
	}
}

func TestInvalidConfigsNameTheProblem(t *testing.T) {
	const ok = `"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":5,"burst":5}}},"credentials":{"c1":{"token_env":"T"}}`
	tests := []struct {
		name, json, want string
	}{
		{"not JSON", `{`, "unexpected EOF"},
		{"unknown field", `{"chanels":{}}`, `unknown field "chanels"`},
		{"no channels", `{"channels":{}}`, "channels: none configured"},
		{"zero rate", `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":0,"burst":5}}},"credentials":{"c1":{"token_env":"T"}}}}}`, "channels.bk.endpoints.rates.limit: invalid limit.rate: 0"},
		{"zero burst", `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":1,"burst":0}}},"credentials":{"c1":{"token_env":"T"}}}}}`, "limit.burst"},
		{"unknown endpoint", `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"photos":{"path":"/p","limit":{"rate":1,"burst":1}}},"credentials":{"c1":{"token_env":"T"}}}}}`, "channels.bk.endpoints.photos: unknown endpoint"},
		{"bad URL", `{"channels":{"bk":{"base_url":"ftp://x","endpoints":{"rates":{"path":"/r","limit":{"rate":1,"burst":1}}},"credentials":{"c1":{"token_env":"T"}}}}}`, "channels.bk.base_url"},
		{"no token env", `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":1,"burst":1}}},"credentials":{"c1":{}}}}}`, "channels.bk.credentials.c1.token_env: empty"},
		{"unknown channel", `{"channels":{"bk":{` + ok + `}},"properties":{"h1":[{"channel":"ex","credential":"c1","hotel_ref":"R"}]}}`, `properties.h1[0].channel: unknown channel "ex"`},
		{"unknown credential", `{"channels":{"bk":{` + ok + `}},"properties":{"h1":[{"channel":"bk","credential":"c9","hotel_ref":"R"}]}}`, `properties.h1[0].credential: channel "bk" has no credential "c9"`},
		{"range too long", `{"max_range_days":400,"channels":{"bk":{` + ok + `}}}`, "max_range_days is 400"},
		{"separator in name", `{"channels":{"b#k":{` + ok + `}}}`, "may not be empty or contain '#'"},
		{"max_items below a change", `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":1,"burst":1},"max_items":30}},"credentials":{"c1":{"token_env":"T"}}}}}`, "channels.bk.endpoints.rates.max_items: 30, want 31"},
		{"max_bytes tiny", `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":1,"burst":1},"max_bytes":100}},"credentials":{"c1":{"token_env":"T"}}}}}`, "channels.bk.endpoints.rates.max_bytes: 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestEveryProblemIsReported(t *testing.T) {
	_, err := Parse([]byte(`{"channels":{"bk":{"base_url":"nope","endpoints":{"rates":{"path":"/r","limit":{"rate":-1,"burst":0}}},"credentials":{}}}}`))
	for _, want := range []string{"base_url", "limit.rate", "credentials: none"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not report %s", err, want)
		}
	}
}
