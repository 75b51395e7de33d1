package dlq

import "testing"

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
