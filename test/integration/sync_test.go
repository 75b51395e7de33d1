package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// connectionsJSON is a config whose one channel is the mock OTA.
func connectionsJSON(otaURL string, lim limiter.Limit) string {
	return fmt.Sprintf(`{
  "max_range_days": 31,
  "channels": {"booking_com": {
    "base_url": %q, "allow_http": true,
    "endpoints": {
      "availability": {"path": "/v1/availability", "limit": {"rate": %g, "burst": %d}},
      "rates": {"path": "/v1/rates", "limit": {"rate": %g, "burst": %d}}
    },
    "credentials": {"cred-1": {"token_env": "TEST_OTA_TOKEN"}}
  }},
  "properties": {"hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1001"}]}
}`, otaURL, lim.Rate, lim.Burst, lim.Rate, lim.Burst)
}

// changeEvent is a PMS change in its EventBridge envelope.
func changeEvent(id string, seq int64, kind, from, to string, values map[string]any) string {
	detail, _ := json.Marshal(ari.Change{EventID: id, PropertyID: "hotel-aurora", Sequence: seq, Kind: kind,
		RoomType: "DBL", RatePlan: "BAR", From: from, To: to, Values: values})
	return fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"ARI change","source":"pms","time":"2026-11-30T12:00:00Z","detail":%s}`, id, detail)
}

func newSyncer(t *testing.T, p *pipeline, lim limiter.Limit) *syncer.Syncer {
	t.Helper()
	return newSyncerOn(t, p, lim, emulator.DynamoDB(t))
}

// newSyncerOn is newSyncer with its state and lanes on db.
func newSyncerOn(t *testing.T, p *pipeline, lim limiter.Limit, db *dynamodb.Client) *syncer.Syncer {
	t.Helper()
	cfg, err := config.Parse([]byte(connectionsJSON(p.ota.URL(), lim)))
	if err != nil {
		t.Fatal(err)
	}
	stateTable := emulator.NewStateTable(t, db)
	sy := &syncer.Syncer{Config: cfg, State: &ari.Store{DB: db, Table: stateTable}, Lanes: &lane.Store{DB: db, Table: stateTable},
		Token: func(string) string { return "tok" }, Linger: -1}
	d := p.dispatcher(workerOpts{})
	if err := handTo(sy, d); err != nil {
		t.Fatal(err)
	}
	return sy
}

// otaDay names a date of the test's one product at the OTA.
func otaDay(kind, date string) otacopy.Day {
	return otacopy.Day{HotelRef: "BK-1001", Kind: kind, RoomType: "DBL", RatePlan: "BAR", Date: date}
}

func otaCopy(t *testing.T, p *pipeline) *otacopy.Copy {
	t.Helper()
	c, err := otacopy.Build(p.ota.Accepted())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Events for the same dates, delivered newest first, end with the newest
// values at the OTA: older events can neither regress the state nor push
// over it, and the superseded ones push nothing at all.
func TestReverseOrderEventsEndWithNewestAtTheOTA(t *testing.T) {
	t.Parallel()
	reverseOrderEvents(t, &resendCounter{})
}

// The same when the emulator's answer to the newest event's state write is
// lost and the SDK sends the write again: the resend finds the event's own
// values in place, so the report counts no date applied, and still the
// event's lane is marked and pushed once with the newest values.
func TestReverseOrderEventsSurviveALostStateAnswer(t *testing.T) {
	t.Parallel()
	var lost atomic.Bool
	reverseOrderEvents(t, &resendCounter{lose: func(r *http.Request) bool {
		// The first write is the newest event's state; lose its answer only.
		return r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.UpdateItem" && lost.CompareAndSwap(false, true)
	}})
	if !lost.Load() {
		t.Fatal("no answer was lost, so the test proves nothing")
	}
}

func reverseOrderEvents(t *testing.T, rc *resendCounter) {
	t.Helper()
	lim := limiter.PerSecond(20, 10)
	p := newPipeline(t, lim, mockota.Config{Limit: lim})
	sy := newSyncerOn(t, p, lim, dynamoDBCountingResends(t, rc))
	ctx := context.Background()
	for seq := int64(5); seq >= 1; seq-- {
		resendsBefore := rc.resends.Load()
		rep, err := sy.HandleChange(ctx, changeEvent(fmt.Sprintf("ev-%d", seq), seq, "rates", "2026-12-01", "2026-12-03",
			map[string]any{"amount": fmt.Sprintf("%d.00", 100+seq)}))
		if err != nil {
			t.Fatal(err)
		}
		wantApplied, wantJobs := 0, 0
		if seq == 5 {
			wantApplied, wantJobs = 3, 1
			if rc.resends.Load() > resendsBefore && rep.Applied == 0 {
				// Its write landed, its answer did not, and the resend met
				// the event's own values (ari counts them current, not
				// applied). The push below must happen all the same.
				t.Logf("event seq 5: its state write was sent again (an answer lost); %d dates reported applied", rep.Applied)
				wantApplied = 0
			}
		}
		if rep.Applied != wantApplied || len(rep.Results) != wantJobs {
			t.Fatalf("event seq %d: %+v, want %d dates applied and %d push jobs (requests resent: %d)", seq, rep, wantApplied, wantJobs, rc.resends.Load())
		}
		if wantJobs == 1 && rep.Results[0].Outcome != dispatch.Pushed {
			t.Fatalf("event seq %d: %+v, want pushed", seq, rep.Results[0])
		}
	}
	if n := len(p.ota.Accepted()); n != 1 {
		t.Fatalf("the OTA received %d pushes, want 1 (the older events push nothing)", n)
	}
	ota := otaCopy(t, p)
	for _, date := range []string{"2026-12-01", "2026-12-02", "2026-12-03"} {
		h, ok := ota.Held(otaDay("rates", date))
		if !ok || h.Sequence != 5 || !strings.Contains(h.Values, "105.00") {
			t.Fatalf("the OTA ends with %s = %+v, want seq 5 (105.00)", date, h)
		}
	}
}

// A late event for part of a range only pushes; its range's newer days
// are left as they are in state, and the OTA ends with the newest per day.
func TestPartlySupersededEventStillPushesItsNewestDay(t *testing.T) {
	lim := limiter.PerSecond(20, 10)
	p := newPipeline(t, lim, mockota.Config{Limit: lim})
	sy := newSyncer(t, p, lim)
	ctx := context.Background()
	if _, err := sy.HandleChange(ctx, changeEvent("ev-9", 9, "availability", "2026-12-02", "2026-12-02", map[string]any{"available": 9})); err != nil {
		t.Fatal(err)
	}
	rep, err := sy.HandleChange(ctx, changeEvent("ev-4", 4, "availability", "2026-12-01", "2026-12-02", map[string]any{"available": 4}))
	if err != nil || rep.Applied != 1 || len(rep.Results) != 1 || rep.Results[0].Outcome != dispatch.Pushed {
		t.Fatalf("older event over a range it partly owns: %+v %v, want 1 date applied and pushed", rep, err)
	}
	ota := otaCopy(t, p)
	d1, _ := ota.Held(otaDay("availability", "2026-12-01"))
	d2, _ := ota.Held(otaDay("availability", "2026-12-02"))
	if d1.Sequence != 4 || d2.Sequence != 9 {
		t.Fatalf("the OTA holds 12-01 seq %d and 12-02 seq %d, want 4 and 9", d1.Sequence, d2.Sequence)
	}
}

// Bad events go to the DLQ with the reason and are never retried.
func TestBadEventsAreDeadLetteredWithTheReason(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(20, 10)
	p := newPipeline(t, lim, mockota.Config{Limit: lim})
	sy := newSyncer(t, p, lim)
	unknownProperty := strings.Replace(changeEvent("ev-x", 1, "rates", "2026-12-01", "2026-12-01", map[string]any{"amount": 1}), "hotel-aurora", "hotel-nowhere", 1)
	tests := []struct{ name, body, reason string }{
		{"malformed JSON", `{"source":"pms","detail":`, "not JSON"},
		{"unknown property", unknownProperty, `unknown property "hotel-nowhere"`},
		{"inverted range", changeEvent("ev-i", 1, "rates", "2026-12-05", "2026-12-01", map[string]any{"amount": 1}), "inverted"},
		{"range too long", changeEvent("ev-l", 1, "rates", "2026-12-01", "2027-02-01", map[string]any{"amount": 1}), "more than the 31 allowed"},
		{"unknown kind", changeEvent("ev-k", 1, "photos", "2026-12-01", "2026-12-01", map[string]any{"url": "x"}), `unknown kind "photos"`},
	}
	for _, tt := range tests {
		rep, err := sy.HandleChange(context.Background(), tt.body)
		if err != nil || !strings.Contains(rep.Invalid, tt.reason) {
			t.Errorf("%s: %+v %v, want dead-lettered with %q", tt.name, rep, err, tt.reason)
		}
	}
	dlq := p.receiveDLQ()
	if len(dlq) != len(tests) {
		t.Fatalf("DLQ holds %d messages, want %d", len(dlq), len(tests))
	}
	for _, tt := range tests {
		if reason := dlq[tt.body]; !strings.Contains(reason, tt.reason) {
			t.Errorf("%s: DLQ reason %q, want %q", tt.name, reason, tt.reason)
		}
	}
	if n := len(p.ota.Requests()); n != 0 {
		t.Errorf("%d bad events reached the OTA", n)
	}
}
