package config

import (
	"strings"
	"testing"
)

func TestCost(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		want     float64 // ItemCost when valid
		err      string  // in the error otherwise
	}{
		{"requests by default", `{"path":"/r","limit":{"rate":5,"burst":5}}`, 0, ""},
		{"requests said", `{"path":"/r","limit":{"rate":5,"burst":5},"cost":"requests"}`, 0, ""},
		{"items weigh 1 by default", `{"path":"/r","limit":{"rate":50,"burst":100},"cost":"items"}`, 1, ""},
		{"items with a weight", `{"path":"/r","limit":{"rate":50,"burst":100},"cost":"items","item_weight":2.5}`, 2.5, ""},
		{"unknown cost", `{"path":"/r","limit":{"rate":5,"burst":5},"cost":"bytes"}`, 0,
			`channels.bk.endpoints.rates.cost: "bytes", want "requests" (the default) or "items"`},
		{"weight without items", `{"path":"/r","limit":{"rate":5,"burst":5},"item_weight":2}`, 0,
			`channels.bk.endpoints.rates.item_weight: 2, but cost is "requests"`},
		{"negative weight", `{"path":"/r","limit":{"rate":5,"burst":5},"cost":"items","item_weight":-1}`, 0,
			`channels.bk.endpoints.rates.item_weight: -1, want more than 0 and at most 1000`},
		{"an item over the burst", `{"path":"/r","limit":{"rate":5,"burst":5},"cost":"items","item_weight":6}`, 0,
			`channels.bk.endpoints.rates.item_weight: 6 tokens per item exceeds limit.burst 5`},
		{"an item over the normal share", `{"path":"/r","limit":{"rate":5,"burst":5},"cost":"items","item_weight":3,"urgent_reserve":3}`, 0,
			`channels.bk.endpoints.rates.item_weight: 3 tokens per item exceeds limit.burst − urgent_reserve (2)`},
		{"items with shards", `{"path":"/r","limit":{"rate":50,"burst":50},"cost":"items","shards":2}`, 0,
			`channels.bk.endpoints.rates.cost: "items" meters one bucket`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(modesConfig(tt.endpoint)))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse = %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Channels["bk"].Endpoints["rates"].ItemCost(); got != tt.want {
				t.Errorf("ItemCost = %v, want %v", got, tt.want)
			}
		})
	}
}
