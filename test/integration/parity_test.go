package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/parity"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A hotelier edits a count on the OTA's extranet by hand. The parity check
// reads the OTA's copy through its own bucket (the mock answers
// ProductAvailRateRetrievalRQ from what it holds), finds the one drifted
// date among those stored, counts it, and repairs it: the repair marks
// the lane through the changes queue, and the push that follows sends the
// stored value back. A second check finds nothing. The oracle is the mock
// OTA's own copy, read with test/otaformat.
func TestParityRepairsACellEditedAtTheOTA(t *testing.T) {
	lim := limiter.PerSecond(50, 20)
	p := newPipeline(t, lim, mockota.Config{Limit: lim, Wire: &mockota.Wire{Format: mockota.WireExpediaAR, MappedRooms: []string{"DBL", "SGL"}}})
	cfg, err := config.Parse(fmt.Appendf(nil, `{
  "max_range_days": 62,
  "channels": {"ota": {
    "base_url": %q, "allow_http": true, "format": "expedia-ar",
    "endpoints": {"availability": {"path": "/v1/availability", "limit": {"rate": 50, "burst": 20}}},
    "read": {"path": "/v1/read", "limit": {"rate": 5, "burst": 2}},
    "credentials": {"cred-1": {"token_env": "TEST_OTA_LOGIN"}}
  }},
  "properties": {"hotel-aurora": [{"channel": "ota", "credential": "cred-1", "hotel_ref": "H-1001"}]}
}`, p.ota.URL()))
	if err != nil {
		t.Fatal(err)
	}
	db := emulator.DynamoDB(t)
	stateTable := emulator.NewStateTable(t, db)
	sy := &syncer.Syncer{Config: cfg, State: &ari.Store{DB: db, Table: stateTable}, Lanes: &lane.Store{DB: db, Table: stateTable},
		Token: func(string) string { return "fleet-user:s3cret-pw" }, Linger: -1}
	if err := handTo(sy, p.dispatcher(workerOpts{})); err != nil {
		t.Fatal(err)
	}
	deliver := func(bodies ...string) {
		t.Helper()
		msgs := make([]syncer.Message, len(bodies))
		for i, b := range bodies {
			msgs[i] = syncer.Message{ID: fmt.Sprint(i), Body: b}
		}
		for _, m := range sy.HandleBatch(context.Background(), msgs) {
			if m.Err != nil || m.Change.Invalid != "" {
				t.Fatalf("message %s: %v %s", m.ID, m.Err, m.Change.Invalid)
			}
		}
	}
	change := func(seq int64, room string, n int) string {
		detail, _ := json.Marshal(ari.Change{EventID: fmt.Sprintf("ev-%d", seq), PropertyID: "hotel-aurora", Sequence: seq, Kind: "availability",
			RoomType: room, From: "2027-01-10", To: "2027-01-12", Values: map[string]any{"available": n}})
		return fmt.Sprintf(`{"version":"0","id":"ev-%d","detail-type":"ARI change","source":"pms","time":"2026-11-30T12:00:00Z","detail":%s}`, seq, detail)
	}
	deliver(change(1, "DBL", 5), change(2, "SGL", 3))
	held := func(room, date string) any { return p.ota.Holds("H-1001", room, "", date)["available"] }
	if got := held("DBL", "2027-01-11"); got != 5 {
		t.Fatalf("after the push the OTA holds DBL 2027-01-11 available %v, want 5", got)
	}

	// The hotelier's edit, through the mock's admin endpoint.
	edit := `{"hotel":"H-1001","room_type":"DBL","date":"2027-01-11","values":{"available":9}}`
	resp, err := http.Post(p.ota.URL()+mockota.AdminPrefix+"edit", "application/json", strings.NewReader(edit))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := held("DBL", "2027-01-11"); got != 9 {
		t.Fatalf("the edit left DBL 2027-01-11 available %v at the OTA, want 9", got)
	}

	readLimiter, err := limiter.New(emulator.DynamoDB(t), limiter.WithTable(p.table))
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	checker := &parity.Checker{Config: cfg, State: sy.State, Limiter: readLimiter,
		Secret:  func(context.Context, string) (string, error) { return "fleet-user:s3cret-pw", nil },
		Repair:  parity.QueueRepairer{SQS: p.sqs, QueueURL: p.changesURL},
		Metrics: &metrics}
	chk := parity.Check{PropertyID: "hotel-aurora", Connection: cfg.Properties["hotel-aurora"][0], From: "2027-01-01", To: "2027-02-15"}
	rep, err := checker.Run(context.Background(), chk)
	if err != nil {
		t.Fatal(err)
	}
	var drifted []string
	for _, d := range rep.Drifted {
		drifted = append(drifted, fmt.Sprintf("%s %s %s %v", d.Kind, d.RoomType, d.Date, d.Fields))
	}
	if want := []string{"availability DBL 2027-01-11 [available]"}; !reflect.DeepEqual(drifted, want) || rep.Days != 6 || rep.Reads != 2 || rep.Repairs != 1 {
		t.Fatalf("first check: %d days compared, %d reads, drifted %v, %d repairs; want 6 days (two rooms × 3), 2 reads (31 days each), drifted %v, 1 repair",
			rep.Days, rep.Reads, drifted, rep.Repairs, want)
	}
	if got := emfValue(t, metrics.String(), parity.MetricDrift); got != 1 {
		t.Errorf("EMF %s = %v, want 1: %s", parity.MetricDrift, got, metrics.String())
	}

	// The repair travels as a change on the changes queue, as the sync
	// function's event source would hand it over.
	if n := p.depth(p.changesURL); n > 0 {
		deliver(p.receiveAll(p.changesURL, n)...)
	}
	if got := held("DBL", "2027-01-11"); got != 5 {
		t.Fatalf("after the repair the OTA holds DBL 2027-01-11 available %v, want the stored 5", got)
	}
	for _, d := range []string{"2027-01-10", "2027-01-12"} {
		if got := held("DBL", d); got != 5 {
			t.Errorf("DBL %s at the OTA: available %v, want 5 (untouched)", d, got)
		}
	}

	metrics.Reset()
	again, err := checker.Run(context.Background(), chk)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Drifted) != 0 || again.Repairs != 0 || again.Days != 6 {
		t.Errorf("second check: drifted %v, %d repairs over %d days; want none over 6", again.Drifted, again.Repairs, again.Days)
	}
	if got := emfValue(t, metrics.String(), parity.MetricDrift); got != 0 {
		t.Errorf("second check: EMF %s = %v, want 0", parity.MetricDrift, got)
	}
	reads := 0
	for _, r := range p.ota.Requests() {
		if r.Read {
			reads++
			if r.Endpoint != "read" || r.Credential != "fleet-user" || !r.Metered {
				t.Errorf("a read reached the OTA as %+v, want metered on endpoint read under fleet-user", r)
			}
		}
	}
	if reads != 4 {
		t.Errorf("the OTA saw %d reads, want 4 (two checks of two windows)", reads)
	}
}

// emfValue is a metric's value in an EMF line.
func emfValue(t *testing.T, line, name string) float64 {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &m); err != nil {
		t.Fatalf("EMF line %q: %v", line, err)
	}
	v, ok := m[name].(float64)
	if !ok {
		t.Fatalf("EMF line without %s: %s", name, line)
	}
	return v
}

// A vendor that meters reads tighter than the config says answers the
// second read 429: the check penalizes its read bucket for the vendor's
// Retry-After, reads that window again once it has passed, and is
// accepted. The push meter is not touched.
func TestParityReadThrottledWaitsOutTheVendor(t *testing.T) {
	lim := limiter.PerSecond(50, 20)
	p := newPipeline(t, lim, mockota.Config{Limit: lim, Limits: map[string]gcra.Limit{"read": {Rate: 0.5, Burst: 1}},
		Wire: &mockota.Wire{Format: mockota.WireExpediaAR}})
	cfg, err := config.Parse(fmt.Appendf(nil, `{
  "channels": {"ota": {
    "base_url": %q, "allow_http": true, "format": "expedia-ar",
    "endpoints": {"availability": {"path": "/v1/availability", "limit": {"rate": 50, "burst": 20}}},
    "read": {"path": "/v1/read", "limit": {"rate": 5, "burst": 2}},
    "credentials": {"cred-1": {"token_env": "TEST_OTA_LOGIN"}}
  }},
  "properties": {"hotel-aurora": [{"channel": "ota", "credential": "cred-1", "hotel_ref": "H-1001"}]}
}`, p.ota.URL()))
	if err != nil {
		t.Fatal(err)
	}
	db := emulator.DynamoDB(t)
	lm, err := limiter.New(db, limiter.WithTable(p.table))
	if err != nil {
		t.Fatal(err)
	}
	checker := &parity.Checker{Config: cfg, State: &ari.Store{DB: db, Table: emulator.NewStateTable(t, db)}, Limiter: lm,
		Secret: func(context.Context, string) (string, error) { return "fleet-user:s3cret-pw", nil }}
	rep, err := checker.Run(context.Background(), parity.Check{PropertyID: "hotel-aurora", Connection: cfg.Properties["hotel-aurora"][0],
		From: "2027-01-01", To: "2027-02-15"})
	if err != nil {
		t.Fatal(err)
	}
	var statuses []int
	for _, r := range p.ota.Requests() {
		statuses = append(statuses, r.Status)
	}
	if rep.Reads != 2 || rep.Throttled != 1 || !reflect.DeepEqual(statuses, []int{200, 429, 200}) {
		t.Errorf("%d reads, %d throttled; the vendor answered %v; want 2 reads, 1 throttled, answered 200, 429, 200", rep.Reads, rep.Throttled, statuses)
	}
	st, err := lm.State(context.Background(), limiter.Bucket{Key: config.BucketKey("ota", "cred-1", "availability"), Limit: limiter.PerSecond(50, 20)})
	if err != nil {
		t.Fatal(err)
	}
	if !st.TAT.IsZero() {
		t.Errorf("the push meter's bucket was written (%+v): a read's throttle is the read bucket's", st)
	}
}
