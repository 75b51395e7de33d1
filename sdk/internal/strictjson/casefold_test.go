package strictjson_test

import (
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/internal/strictjson"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// encoding/json matches keys to struct fields ignoring case, so a config
// that says "rate": 5 and then "Rate": 500 loads with rate 500, and an
// event with "sequence" and "Sequence" is read with the second. Both are
// refused, naming the keys; keys of maps, which the decoder compares as
// they are, stay case-sensitive.
func TestCaseVariantDuplicateKeysAreRefused(t *testing.T) {
	configJSON := `{"channels":{"bk":{"base_url":"https://x.example/api","endpoints":{"rates":{"path":"/r","limit":{"rate":5,"burst":5}}},` +
		`"credentials":{"c1":{"token_env":"T"}}}},"properties":{"h1":[{"channel":"bk","credential":"c1","hotel_ref":"R"}]}}`
	detail := `{"event_id":"ev-1","property_id":"hotel-aurora","sequence":7,"kind":"rates","room_type":"DBL","rate_plan":"BAR","from":"2026-12-01","to":"2026-12-03","values":{"amount":"129.00"}}`
	event := func(detail string) string {
		return `{"version":"0","id":"e1","source":"pms","detail-type":"ARI change","time":"2026-11-30T12:00:00Z","detail":` + detail + `}`
	}
	loadConfig := func(s string) error { _, err := config.Parse([]byte(s)); return err }
	parseEvent := func(s string) error { _, err := ari.Parse(s, 31); return err }
	tests := []struct {
		name  string
		parse func(string) error
		input string
		want  string // "" means accepted
	}{
		{"config as it is", loadConfig, configJSON, ""},
		{"config: rate then Rate", loadConfig, strings.Replace(configJSON, `"burst":5}`, `"burst":5,"Rate":500}`, 1),
			`channels.bk.endpoints.rates.limit.Rate: keys "rate" and "Rate" both set "rate"`},
		{"config: RATE then rate", loadConfig, strings.Replace(configJSON, `"rate":5,`, `"RATE":500,"rate":5,`, 1),
			`keys "RATE" and "rate" both set "rate"`},
		{"config: a property's Channel", loadConfig, strings.Replace(configJSON, `"channel":"bk",`, `"channel":"bk","Channel":"xx",`, 1),
			`properties.h1[0].Channel: keys "channel" and "Channel" both set "channel"`},
		{"config: Max_Range_Days at the top", loadConfig, configJSON[:len(configJSON)-1] + `,"max_range_days":31,"Max_Range_Days":7}`,
			`keys "max_range_days" and "Max_Range_Days" both set "max_range_days"`},
		{"config: credentials c1 and C1 are two", loadConfig, strings.Replace(configJSON, `"c1":{"token_env":"T"}`, `"c1":{"token_env":"T"},"C1":{"token_env":"U"}`, 1), ""},
		{"event as it is", parseEvent, event(detail), ""},
		{"event: sequence then Sequence", parseEvent, event(strings.Replace(detail, `"sequence":7`, `"sequence":7,"Sequence":9`, 1)),
			`detail.Sequence: keys "sequence" and "Sequence" both set "sequence"`},
		{"event: Source then source", parseEvent, strings.Replace(event(detail), `"source":"pms"`, `"Source":"crm","source":"pms"`, 1),
			`source: keys "Source" and "source" both set "source"`},
		{"event: values amount and Amount are two", parseEvent, event(strings.Replace(detail, `{"amount":"129.00"}`, `{"amount":"129.00","Amount":"1"}`, 1)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.parse(tt.input)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v, want accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// The check itself, on types the decoder meets: embedded fields,
	// tags, fields that decode themselves.
	type inner struct {
		Kind string `json:"kind"`
	}
	type outer struct {
		inner
		Name  string
		Skip  string `json:"-"`
		Times []struct {
			At string `json:"at"`
		} `json:"times"`
	}
	checks := []struct{ json, want string }{
		{`{"kind":"a","Name":"n","times":[{"at":"x"}]}`, ""},
		{`{"kind":"a","KIND":"b"}`, `keys "kind" and "KIND" both set "kind"`},
		{`{"Name":"a","name":"b"}`, `keys "Name" and "name" both set "Name"`},
		{`{"times":[{"at":"x"},{"at":"x","AT":"y"}]}`, `times[1].AT: keys "at" and "AT"`},
		{`{"skip":"a","Skip":"b"}`, ""}, // no field: the decoder's DisallowUnknownFields names them
	}
	for _, c := range checks {
		err := strictjson.CheckFor([]byte(c.json), &outer{})
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckFor(%s) = %v, want %q", c.json, err, c.want)
		}
	}
}
