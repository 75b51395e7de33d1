package format_test

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

var eqc = format.NewSecret("eqc-user:p@ss\"word")

// The examples follow the structure Expedia documents for AvailRateUpdateRQ
// (developers.expediagroup.com …/avail_rates/reference/request), written
// here in our own words and values.
func TestExpediaAREncode(t *testing.T) {
	tests := []struct {
		name string
		work format.Work
		want string
	}{
		{
			name: "inventory and a closed room type",
			work: format.Work{HotelRef: "36900105", Kind: "availability", Cells: []format.Cell{
				{RoomType: "219025787", Days: append(days("2027-06-01", "2027-06-03", `{"available":4}`), day("2027-06-04", `{"available":0,"closed":true}`))},
			}},
			want: `<?xml version="1.0" encoding="UTF-8"?>
<AvailRateUpdateRQ xmlns="http://www.expediaconnect.com/EQC/AR/2011/06">
  <Authentication username="eqc-user" password="p@ss&#34;word"/>
  <Hotel id="36900105"/>
  <AvailRateUpdate>
    <DateRange from="2027-06-01" to="2027-06-03"/>
    <RoomType id="219025787"><Inventory totalInventoryAvailable="4"/></RoomType>
  </AvailRateUpdate>
  <AvailRateUpdate>
    <DateRange from="2027-06-04" to="2027-06-04"/>
    <RoomType id="219025787" closed="true"><Inventory totalInventoryAvailable="0"/></RoomType>
  </AvailRateUpdate>
</AvailRateUpdateRQ>`,
		},
		{
			name: "a per-day rate",
			work: format.Work{HotelRef: "36900105", Kind: "rates", Cells: []format.Cell{
				{RoomType: "219025787", RatePlan: "280101189", Days: days("2027-06-01", "2027-06-07", `{"amount":"23.0","currency":"EUR"}`)},
			}},
			want: `<AvailRateUpdateRQ xmlns="http://www.expediaconnect.com/EQC/AR/2011/06">
  <Authentication username="eqc-user" password="p@ss&#34;word"/>
  <Hotel id="36900105"/>
  <AvailRateUpdate>
    <DateRange from="2027-06-01" to="2027-06-07"/>
    <RoomType id="219025787">
      <RatePlan id="280101189"><Rate currency="EUR"><PerDay rate="23.0"/></Rate></RatePlan>
    </RoomType>
  </AvailRateUpdate>
</AvailRateUpdateRQ>`,
		},
		{
			name: "restrictions and a closed rate plan",
			work: format.Work{HotelRef: "36900105", Kind: "restrictions", Cells: []format.Cell{
				{RoomType: "219025787", RatePlan: "280101189", Days: []ari.Day{day("2027-06-05", `{"min_los":2,"max_los":14,"closed_to_arrival":true,"closed_to_departure":false,"closed":false}`)}},
				{RoomType: "219025787", RatePlan: "280101190", Days: []ari.Day{day("2027-06-05", `{"closed":true}`)}},
			}},
			want: `<AvailRateUpdateRQ xmlns="http://www.expediaconnect.com/EQC/AR/2011/06">
  <Authentication username="eqc-user" password="p@ss&#34;word"/>
  <Hotel id="36900105"/>
  <AvailRateUpdate>
    <DateRange from="2027-06-05" to="2027-06-05"/>
    <RoomType id="219025787">
      <RatePlan id="280101189" closed="false">
        <Restrictions minLOS="2" maxLOS="14" closedToArrival="true" closedToDeparture="false"/>
      </RatePlan>
    </RoomType>
  </AvailRateUpdate>
  <AvailRateUpdate>
    <DateRange from="2027-06-05" to="2027-06-05"/>
    <RoomType id="219025787"><RatePlan id="280101190" closed="true"/></RoomType>
  </AvailRateUpdate>
</AvailRateUpdateRQ>`,
		},
	}
	f := lookup(t, format.ExpediaAR)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.work.Secret = eqc
			reqs, err := format.Encode(f, tt.work, format.Shape{})
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			if got, want := canon(t, reqs[0].Body), canon(t, []byte(tt.want)); got != want {
				t.Errorf("body:\n%s\nwant\n%s", got, want)
			}
			if reqs[0].Header.Get("Authorization") != "" || reqs[0].Header.Get("Content-Type") != "text/xml" {
				t.Errorf("headers %v: the credential travels in the body", reqs[0].Header)
			}
		})
	}
}

// At most 5,000 updates per message, whatever max_items says; months stay
// together (no split by month unless the endpoint asks).
func TestExpediaARSplitsAt5000Updates(t *testing.T) {
	f := lookup(t, format.ExpediaAR)
	var cells []format.Cell
	for i := range 20 { // 20 rooms × 365 days = 7,300 updates
		cells = append(cells, format.Cell{RoomType: "R" + string(rune('A'+i)), Days: days("2027-01-01", "2027-12-31", `{"available":3}`)})
	}
	w := format.Work{HotelRef: "1", Kind: "availability", Secret: eqc, Cells: cells}
	for _, maxItems := range []int{0, 100_000} {
		reqs, err := format.Encode(f, w, format.Shape{MaxItems: maxItems})
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) != 2 || reqs[0].Work.Items() != 5000 || reqs[1].Work.Items() != 2300 {
			t.Fatalf("max_items %d: %d requests", maxItems, len(reqs))
		}
	}
	if _, err := f.Encode(w); err == nil || !strings.Contains(err.Error(), "7300 updates in one message, more than the 5000") {
		t.Fatalf("Encode of 7,300 updates = %v", err)
	}
}

func TestExpediaARUnexpressible(t *testing.T) {
	f := lookup(t, format.ExpediaAR)
	tests := []struct{ name, kind, plan, values, want string }{
		{"occupancy pricing", "rates", "P", `{"amount":"10","currency":"EUR","guests":2}`, "guests (occupancy pricing) is not supported"},
		{"a rate without a currency", "rates", "P", `{"amount":"10"}`, "needs the rate's currency"},
		{"inventory of a rate plan", "availability", "P", `{"available":3}`, "inventory per room type"},
		{"restrictions of a room type", "restrictions", "", `{"min_los":2}`, "restrictions belong to a rate plan"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := format.Work{HotelRef: "1", Kind: tt.kind, Secret: eqc, Cells: []format.Cell{{RoomType: "R", RatePlan: tt.plan, Days: []ari.Day{day("2027-01-01", tt.values)}}}}
			_, err := format.Encode(f, w, format.Shape{})
			if !errors.Is(err, format.ErrUnexpressible) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Encode = %v, want an UnexpressibleError saying %q", err, tt.want)
			}
		})
	}
}

// Answers as Expedia documents them (…/avail_rates/reference/response and
// error-messaging): an <Error> means nothing was processed, even in a 200.
func TestExpediaARDecode(t *testing.T) {
	f := lookup(t, format.ExpediaAR)
	req, err := f.Encode(format.Work{HotelRef: "1", Kind: "availability", Secret: eqc, Cells: []format.Cell{{RoomType: "R", Days: days("2027-01-01", "2027-01-02", `{"available":1}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	rs := func(inner string) []byte {
		return []byte(`<?xml version="1.0" encoding="UTF-8"?><AvailRateUpdateRS xmlns="http://www.expediaconnect.com/EQC/AR/2011/06">` + inner + `</AvailRateUpdateRS>`)
	}
	tests := []struct {
		name   string
		status int
		header http.Header
		body   []byte
		want   format.Outcome
	}{
		{"success", 200, nil, rs(`<Success/>`), format.Outcome{Verdict: format.Accepted}},
		{"warning beside success", 200, nil, rs(`<Success/><Warning code="4100">Rate change above the verification threshold</Warning>`),
			format.Outcome{Verdict: format.AcceptedWithWarnings, Warnings: []string{"4100: Rate change above the verification threshold"}}},
		{"200 with an error: the whole message refused", 200, nil, rs(`<Error code="3202">Room type 999 is not mapped to hotel 1</Error>`),
			format.Outcome{Verdict: format.Refused, Reason: "3202: Room type 999 is not mapped to hotel 1", Scope: otapush.ScopeMessage}},
		{"400 with an error", 400, nil, rs(`<Error code="2002">Parsing error</Error>`), format.Outcome{Verdict: format.Refused, Reason: "2002: Parsing error", Scope: otapush.ScopeMessage}},
		{"3210: retry", 200, nil, rs(`<Error code="3210">Connection refused</Error>`), format.Outcome{Verdict: format.Transient, Reason: "3210: Connection refused"}},
		{"429 with an XML body", 429, http.Header{"Retry-After": {"2"}}, rs(`<Error code="429">Too many requests</Error>`),
			format.Outcome{Verdict: format.Throttled, Reason: "HTTP 429", RetryAfter: 2 * time.Second}},
		{"500", 503, nil, nil, format.Outcome{Verdict: format.Transient, Reason: "HTTP 503: "}},
		{"200 that is not an AvailRateUpdateRS", 200, nil, []byte(`{"ok":true}`), format.Outcome{Verdict: format.Transient, Reason: `HTTP 200 with no AvailRateUpdateRS: {"ok":true}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := f.Decode(req, format.Response{Status: tt.status, Header: tt.header, Body: tt.body})
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decode =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
