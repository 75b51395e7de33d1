package config

import (
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

func TestFormatKeys(t *testing.T) {
	const base = `{"channels":{"bk":{"base_url":"https://ota.example"%s,"credentials":{"c":{"token_env":"T"}},
	 "endpoints":{"availability":{"path":"/a","limit":{"rate":1,"burst":1}%s}}}},
	 "properties":{"p":[{"channel":"bk","credential":"c","hotel_ref":"H"}]}}`
	tests := []struct {
		name, channel, endpoint string
		want                    string // "" accepted
		shape                   format.Shape
		format                  string
	}{
		{"defaults", "", "", "", format.Shape{MaxItems: DefaultMaxItems, MaxBytes: DefaultMaxBytes, KindsPerMessage: 1}, "json"},
		{"opentravel by month", `,"format":"opentravel"`, `,"split_by":"month","kinds_per_message":1,"max_items":744`, "",
			format.Shape{MaxItems: 744, MaxBytes: DefaultMaxBytes, SplitBy: "month", KindsPerMessage: 1}, "opentravel"},
		{"expedia-ar, kinds together", `,"format":"expedia-ar"`, `,"split_by":"none","kinds_per_message":3`, "",
			format.Shape{MaxItems: DefaultMaxItems, MaxBytes: DefaultMaxBytes, SplitBy: "none", KindsPerMessage: 3}, "expedia-ar"},
		{"opentravel unsplit", `,"format":"opentravel"`, `,"split_by":"none"`, `channels.bk.endpoints.availability.split_by: "none", but format "opentravel" takes one calendar month per request`, format.Shape{}, ""},
		{"unknown format", `,"format":"edifact"`, "", `channels.bk.format: format "edifact" is not registered, want one of expedia-ar, json, opentravel`, format.Shape{}, ""},
		{"unknown split", "", `,"split_by":"week"`, `channels.bk.endpoints.availability.split_by: "week", want "month" or "none"`, format.Shape{}, ""},
		{"too many kinds", "", `,"kinds_per_message":4`, "channels.bk.endpoints.availability.kinds_per_message: 4, want 1 (the default) to 3", format.Shape{}, ""},
		{"negative kinds", "", `,"kinds_per_message":-1`, "kinds_per_message: -1", format.Shape{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(strings.Replace(strings.Replace(base, "%s", tt.channel, 1), "%s", tt.endpoint, 1)))
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Parse = %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ch := c.Channels["bk"]
			if got := ch.Endpoints["availability"].Shape(); got != tt.shape {
				t.Errorf("Shape = %+v, want %+v", got, tt.shape)
			}
			if f, err := ch.MessageFormat(); err != nil || ch.FormatName() != tt.format || f == nil {
				t.Errorf("format %q, %v", ch.FormatName(), err)
			}
		})
	}
}
