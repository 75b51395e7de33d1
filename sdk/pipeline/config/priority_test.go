package config

import (
	"strings"
	"testing"
)

func sharedMeterConfig(rates, availability string) string {
	return `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":` + rates + `,"availability":` + availability +
		`},"credentials":{"c1":{"token_env":"T"}}}}}`
}

func TestPriorityAndMeters(t *testing.T) {
	const normal = `{"path":"/ari","meter":"ari","limit":{"rate":4,"burst":8},"urgent_reserve":4}`
	const urgent = `{"path":"/ari","meter":"ari","limit":{"rate":4,"burst":8},"urgent_reserve":4,"priority":"urgent"}`
	tests := []struct {
		name                string
		rates, availability string
		err                 string
	}{
		{"a shared meter with a reserve", normal, urgent, ""},
		{"own meters by default", `{"path":"/r","limit":{"rate":4,"burst":8}}`, `{"path":"/a","limit":{"rate":2,"burst":2}}`, ""},
		{"a shared meter's limits differ", normal, `{"path":"/ari","meter":"ari","limit":{"rate":4,"burst":9},"urgent_reserve":4,"priority":"urgent"}`,
			`channels.bk.endpoints.rates: shares meter "ari" with availability but not its limits`},
		{"unknown priority", `{"path":"/r","limit":{"rate":4,"burst":8},"priority":"high"}`, urgent,
			`channels.bk.endpoints.rates.priority: "high", want "normal" (the default) or "urgent"`},
		{"reserve the whole burst", `{"path":"/r","limit":{"rate":4,"burst":8},"urgent_reserve":8}`, urgent,
			`channels.bk.endpoints.rates.urgent_reserve: 8, want 0 (none) to limit.burst − 1 (7)`},
		{"reserve with shards", `{"path":"/r","limit":{"rate":4,"burst":8},"urgent_reserve":2,"shards":2}`, urgent,
			`channels.bk.endpoints.rates.urgent_reserve: cannot be combined with shards`},
		{"reserve with limits", `{"path":"/r","limit":{"rate":4,"burst":8},"urgent_reserve":2,"limits":[{"per_minute":120,"burst":60}]}`, urgent,
			`channels.bk.endpoints.rates.urgent_reserve: cannot be combined with limits or property_share`},
		{"reserve with a property share", `{"path":"/r","limit":{"rate":4,"burst":8},"urgent_reserve":2,"property_share":{"rate":1,"burst":4}}`, urgent,
			`channels.bk.endpoints.rates.urgent_reserve: cannot be combined with limits or property_share`},
		{"a meter with '#'", `{"path":"/r","limit":{"rate":4,"burst":8},"meter":"a#b"}`, urgent,
			`channels.bk.endpoints.rates.meter: "a#b" may not contain '#'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(sharedMeterConfig(tt.rates, tt.availability)))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse = %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r, a := c.BucketKey("bk", "c1", "rates"), c.BucketKey("bk", "c1", "availability")
			shared := strings.Contains(tt.rates, `"meter"`)
			if (r == a) != shared {
				t.Errorf("bucket keys %q and %q: shared %v, want %v", r, a, r == a, shared)
			}
		})
	}
}
