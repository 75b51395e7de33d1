package config

import (
	"strings"
	"testing"
	"time"
)

func TestLifetimeParsedAndDefaultsLeftToTheDispatcher(t *testing.T) {
	tests := []struct {
		name, fields string
		age          time.Duration
		deferrals    int
	}{
		{"unset", ``, 0, 0},
		{"both", `,"max_age":"90m","max_deferrals":40`, 90 * time.Minute, 40},
		{"age only", `,"max_age":"36h"`, 36 * time.Hour, 0},
		{"lower bounds", `,"max_age":"1m","max_deferrals":5`, time.Minute, 5},
		{"upper bounds", `,"max_age":"336h","max_deferrals":100000`, 14 * 24 * time.Hour, 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":5,"burst":5}` + tt.fields + `}`)))
			if err != nil {
				t.Fatal(err)
			}
			age, n := c.Channels["bk"].Endpoints["rates"].Lifetime()
			if age != tt.age || n != tt.deferrals {
				t.Fatalf("Lifetime = %v, %d; want %v, %d", age, n, tt.age, tt.deferrals)
			}
		})
	}
}

func TestLifetimeRefusedWithPaths(t *testing.T) {
	const at = "channels.bk.endpoints.rates."
	tests := []struct{ name, fields, want string }{
		{"not a duration", `"max_age":"1 day"`, at + `max_age: "1 day" is not a duration`},
		{"no unit", `"max_age":"86400"`, at + `max_age: "86400" is not a duration`},
		{"zero", `"max_age":"0s"`, at + `max_age: 0s, want 1m0s to 336h0m0s`},
		{"negative", `"max_age":"-1h"`, at + `max_age: -1h, want`},
		{"too short", `"max_age":"59s"`, at + `max_age: 59s, want`},
		{"too long", `"max_age":"337h"`, at + `max_age: 337h, want`},
		{"a number", `"max_age":86400`, `cannot unmarshal number`},
		{"zero deferrals", `"max_deferrals":0`, at + `max_deferrals: 0, want 5`},
		{"negative deferrals", `"max_deferrals":-3`, at + `max_deferrals: -3, want 5`},
		{"too few deferrals", `"max_deferrals":4`, at + `max_deferrals: 4, want 5`},
		{"too many deferrals", `"max_deferrals":100001`, at + `max_deferrals: 100001, want 5`},
		{"fractional deferrals", `"max_deferrals":2.5`, `cannot unmarshal number 2.5`},
		{"given twice", `"max_age":"1h","max_age":"48h"`, `max_age: key "max_age" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":5,"burst":5},` + tt.fields + `}`)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Both problems of one endpoint are reported at once, as every other.
func TestLifetimeBothProblemsReported(t *testing.T) {
	_, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":5,"burst":5},"max_age":"forever","max_deferrals":1}`)))
	if err == nil || !strings.Contains(err.Error(), "max_age") || !strings.Contains(err.Error(), "max_deferrals") {
		t.Fatalf("Parse = %v, want both max_age and max_deferrals named", err)
	}
}
