package config

import (
	"strings"
	"testing"
	"time"
)

func TestMarginKeptAndValidated(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		kept     time.Duration
		err      string // substring of Parse's error; "" for valid
	}{
		{"default", `{"path":"/r","limit":{"rate":20,"burst":40}}`, DefaultMargin, ""},
		{"explicit", `{"path":"/r","limit":{"rate":20,"burst":40},"margin":"250ms"}`, 250 * time.Millisecond, ""},
		{"none", `{"path":"/r","limit":{"rate":20,"burst":40},"margin":"0s"}`, 0, ""},
		// 100 ms at 20/s is 2 tokens: a burst of 2 spares only one.
		{"default cut to what the burst spares", `{"path":"/r","limit":{"rate":20,"burst":2}}`, 50 * time.Millisecond, ""},
		{"default cut to nothing at burst 1", `{"path":"/r","limit":{"rate":20,"burst":1}}`, 0, ""},
		{"default leaves the urgent reserve", `{"path":"/r","limit":{"rate":20,"burst":4},"urgent_reserve":2}`, 50 * time.Millisecond, ""},
		{"default leaves an item", `{"path":"/r","limit":{"rate":20,"burst":4},"cost":"items","item_weight":3}`, 50 * time.Millisecond, ""},
		{"last token", `{"path":"/r","limit":{"rate":20,"burst":40},"margin":"1950ms"}`, 1950 * time.Millisecond, ""},
		{"past the last token", `{"path":"/r","limit":{"rate":20,"burst":40},"margin":"1951ms"}`, 0, "margin: 1951ms keeps 39.02 of limit.burst 40"},
		{"past the urgent reserve", `{"path":"/r","limit":{"rate":20,"burst":10},"urgent_reserve":5,"margin":"250ms"}`, 0, "lower margin to at most 200ms"},
		{"past an item", `{"path":"/r","limit":{"rate":20,"burst":10},"cost":"items","item_weight":4,"margin":"400ms"}`, 0, "where a push needs 4"},
		{"negative", `{"path":"/r","limit":{"rate":20,"burst":40},"margin":"-1ms"}`, 0, "margin: -1ms, want 0s to 10s"},
		{"too long", `{"path":"/r","limit":{"rate":0.1,"burst":40},"margin":"11s"}`, 0, "margin: 11s, want 0s to 10s"},
		{"not a duration", `{"path":"/r","limit":{"rate":20,"burst":40},"margin":"100"}`, 0, `margin: "100" is not a duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(config(tt.endpoint)))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse = %v, want an error mentioning %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Channels["bk"].Endpoints["rates"].KeptMargin(); got != tt.kept {
				t.Errorf("KeptMargin() = %v, want %v", got, tt.kept)
			}
			el, _ := c.Limits("bk", "rates")
			_, lim, _ := c.Endpoint("bk", "rates")
			if el.Limit.Margin != tt.kept || lim.Margin != tt.kept {
				t.Errorf("Limits margin %v, Endpoint margin %v, want %v in both", el.Limit.Margin, lim.Margin, tt.kept)
			}
		})
	}
}
