package dlq

import (
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		body string
		want Kind
	}{
		{`{"id":"e-1","source":"pms","detail-type":"ari-change","detail":{"event_id":"x"}}`, Change},
		{`{"source":"crm","detail":{}}`, Change}, // an event refused for its source goes back too: the fix may be the config
		{`{"v":1,"id":"ev-1#bk#rates","channel":"bk"}`, Job},
		{`{"v":2,"id":"j"}`, Job},
		{`{"id":"j"}`, Unknown},
		{`{"detail":{}}`, Unknown},
		{`[1,2]`, Unknown},
		{`<OTA_HotelRateAmountNotifRQ/>`, Unknown},
		{``, Unknown},
	}
	for _, tt := range tests {
		if got := Classify(tt.body); got != tt.want {
			t.Errorf("Classify(%q) = %s, want %s", tt.body, got, tt.want)
		}
	}
	q := Queues{DLQ: "d", Changes: "c", Deferred: "q"}
	if q.Target(Change) != "c" || q.Target(Job) != "q" || q.Target(Unknown) != "" {
		t.Errorf("targets of %+v wrong", q)
	}
}

// A redriven push job starts its life over, so that one dead-lettered as
// expired is not expired again on arrival; anything unreadable goes back
// unchanged.
func TestRestartedBody(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	tests := []struct{ name, body, want string }{
		{"expired job",
			`{"v":1,"id":"ev-1#bk#rates","channel":"bk","credential":"c1","endpoint":"rates","first_seen":"2026-12-01T10:00:00Z","slot":"2026-12-01T10:05:00Z","deferrals":200,"failures":2,"due":"2026-12-01T10:04:00Z"}`,
			`{"v":1,"id":"ev-1#bk#rates","channel":"bk","credential":"c1","endpoint":"rates","first_seen":"2026-12-03T09:00:00Z","deferrals":0}`},
		{"newer version", `{"v":2,"id":"j","first_seen":"2026-12-01T10:00:00Z","deferrals":5}`, `{"v":2,"id":"j","first_seen":"2026-12-01T10:00:00Z","deferrals":5}`},
	}
	for _, tt := range tests {
		if got := restarted(tt.body, now); got != tt.want {
			t.Errorf("%s: restarted =\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}
