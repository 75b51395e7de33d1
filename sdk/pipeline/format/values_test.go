package format_test

import (
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

func TestParseValues(t *testing.T) {
	ok := []struct{ kind, values string }{
		{"availability", `{"available":0}`},
		{"availability", `{"available":12,"closed":false}`},
		{"rates", `{"amount":"129.00","currency":"EUR","guests":2}`},
		{"rates", `{"amount":129.5}`},
		{"restrictions", `{"min_los":1,"max_los":999,"closed_to_arrival":true,"closed_to_departure":false,"closed":true}`},
	}
	for _, tt := range ok {
		if _, err := format.ParseValues(tt.kind, []byte(tt.values)); err != nil {
			t.Errorf("%s %s: %v", tt.kind, tt.values, err)
		}
	}
	bad := []struct{ kind, values, want string }{
		{"availability", `{}`, "values are empty"},
		{"availability", `[1]`, "not a JSON object"},
		{"availability", `{"available":2.5}`, "want an integer"},
		{"availability", `{"amount":"1"}`, `"amount" is not a availability value`},
		{"availability", `{"closed":"yes"}`, "want true or false"},
		{"rates", `{"currency":"EUR"}`, "rates need an amount"},
		{"rates", `{"amount":"-1"}`, "want a decimal"},
		{"rates", `{"amount":"1.23456"}`, "at most 4 decimals"},
		{"rates", `{"amount":"1","currency":"eur"}`, "ISO 4217"},
		{"rates", `{"amount":"1","guests":0}`, "want an integer 1..99"},
		{"restrictions", `{"min_los":0}`, "want an integer 1..999"},
		{"photos", `{"a":1}`, `unknown kind "photos"`},
	}
	for _, tt := range bad {
		if _, err := format.ParseValues(tt.kind, []byte(tt.values)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s: %v, want %q", tt.kind, tt.values, err, tt.want)
		}
	}
}
