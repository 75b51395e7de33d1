package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/infra/stack"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

func TestParitySetting(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"channels": {
  "ex": {"base_url": "https://ex.example", "format": "expedia-ar", "credentials": {"c": {"token_env": "T"}},
         "endpoints": {"availability": {"path": "/ar", "limit": {"rate": 1, "burst": 1}}},
         "read": {"path": "/parr", "limit": {"rate": 1, "burst": 1}}},
  "bk": {"base_url": "https://bk.example", "format": "opentravel", "credentials": {"c": {"token_env": "T"}},
         "endpoints": {"availability": {"path": "/a", "limit": {"rate": 1, "burst": 1}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		raw  any
		want []stack.ParityCheck
		err  string
	}{
		{"none", nil, nil, ""},
		{"from cdk.json", []any{map[string]any{"property": "p1", "channel": "ex", "every": "24h"}},
			[]stack.ParityCheck{{Property: "p1", Channel: "ex", Every: 24 * time.Hour}}, ""},
		{"from -c", `[{"property": "p1", "channel": "ex", "every": "6h", "days": 90}]`,
			[]stack.ParityCheck{{Property: "p1", Channel: "ex", Every: 6 * time.Hour, Days: 90}}, ""},
		{"a channel without a read", `[{"property": "p1", "channel": "bk", "every": "24h"}]`, nil, `parityChecks[0]: channel "bk" has no "read" endpoint`},
		{"not a duration", `[{"property": "p1", "channel": "ex", "every": "daily"}]`, nil, `parityChecks[0].every: "daily"`},
		{"not an array", `{"property": "p1"}`, nil, "want [{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := paritySetting(tt.raw, cfg)
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v, want one containing %q", err, tt.err)
			case tt.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.err == "" && !reflect.DeepEqual(got, tt.want):
				t.Fatalf("checks %+v, want %+v", got, tt.want)
			}
		})
	}
}
