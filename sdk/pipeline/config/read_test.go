package config

import (
	"strings"
	"testing"
	"time"
)

func TestReadKeys(t *testing.T) {
	const base = `{"channels":{"ex":{"base_url":"https://ota.example/api","credentials":{"c":{"token_env":"T"}}%s,
	 "endpoints":{"availability":{"path":"/ar","limit":{"rate":1,"burst":1}%s}}}},
	 "properties":{"p":[{"channel":"ex","credential":"c","hotel_ref":"H"}]}}`
	tests := []struct {
		name, channel, endpoint string
		want                    string // "" accepted
		days                    int
	}{
		{"expedia-ar with a read", `,"format":"expedia-ar","read":{"path":"/parr","limit":{"rate":2,"burst":4}}`, "", "", 31},
		{"a shorter window", `,"format":"expedia-ar","read":{"path":"/parr","limit":{"rate":2,"burst":4},"max_days":7}`, "", "", 7},
		{"a format that cannot read", `,"format":"opentravel","read":{"path":"/parr","limit":{"rate":2,"burst":4}}`, "",
			`channels.ex.read: format "opentravel" cannot read back what the OTA holds; formats that can: expedia-ar`, 0},
		{"no limit", `,"format":"expedia-ar","read":{"path":"/parr","limit":{"rate":0,"burst":4}}`, "", "channels.ex.read.limit:", 0},
		{"no path", `,"format":"expedia-ar","read":{"limit":{"rate":1,"burst":1}}`, "", "channels.ex.read.path: empty", 0},
		{"a query in the path", `,"format":"expedia-ar","read":{"path":"/parr?x=1","limit":{"rate":1,"burst":1}}`, "", `channels.ex.read.path: "/parr?x=1" may not hold a query`, 0},
		{"a window past the format's", `,"format":"expedia-ar","read":{"path":"/parr","limit":{"rate":1,"burst":1},"max_days":32}`, "",
			"channels.ex.read.max_days: 32, want 1 to 31", 0},
		{"a push meter named read", `,"format":"expedia-ar"`, `,"meter":"read"`, `channels.ex.endpoints.availability.meter: "read" is the read endpoint's meter`, 0},
		{"an unknown key", `,"format":"expedia-ar","read":{"path":"/parr","limit":{"rate":1,"burst":1},"days":3}`, "", `unknown field "days"`, 0},
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
			r, err := c.ReadOf("ex")
			if err != nil {
				t.Fatal(err)
			}
			if r.URL != "https://ota.example/api/parr" || r.MaxDays != tt.days || r.Limit.Rate != 2 || r.Limit.Burst != 4 || r.Limit.Margin != 100*time.Millisecond || r.Reader == nil {
				t.Errorf("ReadOf = %+v, want the URL under base_url, max_days %d, rate 2 burst 4 keeping the 100ms margin", r, tt.days)
			}
		})
	}
	c, err := Parse([]byte(strings.Replace(strings.Replace(base, "%s", "", 1), "%s", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadOf("ex"); err == nil || !strings.Contains(err.Error(), `channel "ex" has no "read" endpoint`) {
		t.Errorf("ReadOf a channel without read = %v", err)
	}
}
