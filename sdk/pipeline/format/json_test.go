package format_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// The json format's body is byte for byte the syncer.Push the pipeline
// sent before formats existed, so the demo and its mock OTA keep working.
func TestJSONIsTodaysPushBody(t *testing.T) {
	f := lookup(t, format.JSON)
	cells := []format.Cell{
		{RoomType: "DBL", RatePlan: "BAR", Days: []ari.Day{day("2026-12-01", `{"amount":"129.00","currency":"EUR"}`), day("2026-12-02", `{"v":1}`)}},
		{RoomType: "SGL", Days: []ari.Day{day("2026-12-31", `{"available":2}`), day("2027-01-01", `{"x":"<&>"}`)}},
		{RoomType: "TWN", RatePlan: "NR"}, // no pending dates: left out, as before
	}
	reqs, err := format.Encode(f, format.Work{HotelRef: "BK-1001", Kind: "rates", Cells: cells, Secret: format.NewSecret("tok")}, format.Shape{})
	if err != nil {
		t.Fatal(err)
	}
	old := syncer.Push{HotelRef: "BK-1001", Kind: "rates"}
	for _, c := range cells[:2] {
		old.Items = append(old.Items, syncer.PushCell{RoomType: c.RoomType, RatePlan: c.RatePlan, Days: c.Days})
	}
	want, _ := json.Marshal(old)
	if len(reqs) != 1 || !bytes.Equal(reqs[0].Body, want) {
		t.Fatalf("json body:\n%s\nwant\n%s", reqs[0].Body, want)
	}
	if reqs[0].Header.Get("Authorization") != "Bearer tok" || reqs[0].Method != http.MethodPost || reqs[0].Path != "" {
		t.Fatalf("request %s %q %v", reqs[0].Method, reqs[0].Path, reqs[0].Redacted().Header)
	}
}

func TestJSONDecode(t *testing.T) {
	f := lookup(t, format.JSON)
	tests := []struct {
		status int
		body   string
		want   format.Outcome
	}{
		{200, `{"ok":true}`, format.Outcome{Verdict: format.Accepted}},
		{204, ``, format.Outcome{Verdict: format.Accepted}},
		{429, `{"errors":{"code":"http_too_many_requests"}}`, format.Outcome{Verdict: format.Throttled, Reason: "HTTP 429"}},
		{502, `bad gateway`, format.Outcome{Verdict: format.Transient, Reason: "HTTP 502: bad gateway"}},
		{422, `{"error":"unknown room"}`, format.Outcome{Verdict: format.Refused, Reason: `HTTP 422: {"error":"unknown room"}`, Scope: otapush.ScopeMessage}},
		{401, ``, format.Outcome{Verdict: format.Refused, Reason: `HTTP 401: `, Scope: otapush.ScopeCredential}},
		{403, ``, format.Outcome{Verdict: format.Refused, Reason: `HTTP 403: `, Scope: otapush.ScopeCredential}},
	}
	for _, tt := range tests {
		if got := f.Decode(format.Request{}, format.Response{Status: tt.status, Body: []byte(tt.body)}); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("HTTP %d: %+v, want %+v", tt.status, got, tt.want)
		}
	}
}
