package format_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

func reader(t *testing.T, name string) format.Reader {
	t.Helper()
	r, err := format.ReaderOf(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOnlyExpediaARReads(t *testing.T) {
	reader(t, format.ExpediaAR)
	for _, name := range []string{format.JSON, format.OpenTravel} {
		_, err := format.ReaderOf(name)
		if err == nil || !strings.Contains(err.Error(), "cannot read back") || !strings.Contains(err.Error(), format.ExpediaAR) {
			t.Errorf("ReaderOf(%q) = %v, want an error naming %q as the format that can", name, err, format.ExpediaAR)
		}
	}
}

func TestExpediaPARREncodeRead(t *testing.T) {
	req, err := reader(t, format.ExpediaAR).EncodeRead(format.ReadQuery{HotelRef: "36900105", From: "2027-06-01", To: "2027-06-30", Secret: eqc})
	if err != nil {
		t.Fatal(err)
	}
	want := `<?xml version="1.0" encoding="UTF-8"?>
<ProductAvailRateRetrievalRQ xmlns="http://www.expediaconnect.com/EQC/PAR/2013/07">
  <Authentication username="eqc-user" password="p@ss&#34;word"/>
  <Hotel id="36900105"/>
  <ParamSet><AvailRateRetrieval from="2027-06-01" to="2027-06-30"/></ParamSet>
</ProductAvailRateRetrievalRQ>`
	if got, w := canon(t, req.Body), canon(t, []byte(want)); got != w {
		t.Errorf("body\n got %s\nwant %s", got, w)
	}
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "text/xml" {
		t.Errorf("method %q content type %q, want POST text/xml", req.Method, req.Header.Get("Content-Type"))
	}
	if strings.Contains(req.String(), "p@ss") {
		t.Errorf("the request's String shows the password: %s", req)
	}
	for _, q := range []format.ReadQuery{{From: "2027-06-01", To: "2027-06-02", Secret: eqc}, {HotelRef: "1", From: "2027-06-02", To: "2027-06-01", Secret: eqc}} {
		if _, err := reader(t, format.ExpediaAR).EncodeRead(q); err == nil {
			t.Errorf("EncodeRead(%+v) = nil error, want one", q)
		}
	}
}

func TestExpediaPARRDecodeRead(t *testing.T) {
	q := format.ReadQuery{HotelRef: "36900105", From: "2027-06-01", To: "2027-06-02"}
	ok := func(body string) format.Response {
		return format.Response{Status: 200, Body: []byte(`<?xml version="1.0"?><ProductAvailRateRetrievalRS xmlns="http://www.expediaconnect.com/EQC/PAR/2013/07">` + body + `</ProductAvailRateRetrievalRS>`)}
	}
	tests := []struct {
		name    string
		resp    format.Response
		verdict format.Verdict
		scope   otapush.Scope
		// want is the holding as cell → date → values JSON.
		want map[string]map[string]string
	}{
		{
			name: "a room type with inventory and a rate plan with all it holds; dates outside the window left out",
			resp: ok(`<AvailRateList>
  <AvailRate date="2027-06-01">
    <RoomType id="R1" closed="false"><Inventory totalInventoryAvailable="5"/>
      <RatePlan id="P1" closed="true"><Rate currency="EUR"><PerDay rate="129.50"/></Rate>
        <Restrictions minLOS="2" maxLOS="14" closedToArrival="true" closedToDeparture="false"/></RatePlan>
    </RoomType>
  </AvailRate>
  <AvailRate date="2027-06-03"><RoomType id="R1"><Inventory totalInventoryAvailable="9"/></RoomType></AvailRate>
</AvailRateList>`),
			verdict: format.Accepted,
			want: map[string]map[string]string{
				"availability R1 ":   {"2027-06-01": `{"available":5,"closed":false}`},
				"availability R1 P1": {"2027-06-01": `{"closed":true}`},
				"rates R1 P1":        {"2027-06-01": `{"amount":"129.50","currency":"EUR"}`},
				"restrictions R1 P1": {"2027-06-01": `{"closed":true,"min_los":2,"max_los":14,"closed_to_arrival":true,"closed_to_departure":false}`},
			},
		},
		{name: "nothing held", resp: ok(`<AvailRateList/>`), verdict: format.Accepted, want: map[string]map[string]string{}},
		{name: "bad login", resp: ok(`<Error code="1001">Authentication error</Error>`), verdict: format.Refused, scope: otapush.ScopeCredential},
		{name: "retry code", resp: ok(`<Error code="3210">Communication error</Error>`), verdict: format.Transient},
		{name: "business error", resp: ok(`<Error code="3015">Hotel id unknown</Error>`), verdict: format.Refused, scope: otapush.ScopeMessage},
		{name: "throttled", resp: format.Response{Status: 429, Header: http.Header{"Retry-After": {"3"}}}, verdict: format.Throttled},
		{name: "hotel not authorised", resp: format.Response{Status: 403, Body: []byte(`<Error code="1000">no</Error>`)}, verdict: format.Refused, scope: otapush.ScopeHotel},
		{name: "cut short", resp: format.Response{Status: 200, Body: []byte(`<ProductAvailRateRetrievalRS><AvailRateList><AvailRate date="2027-06-01">`)}, verdict: format.Transient},
		{name: "a bad number", resp: ok(`<AvailRateList><AvailRate date="2027-06-01"><RoomType id="R1"><Inventory totalInventoryAvailable="x"/></RoomType></AvailRate></AvailRateList>`), verdict: format.Refused, scope: otapush.ScopeMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, o := reader(t, format.ExpediaAR).DecodeRead(q, tt.resp)
			if o.Verdict != tt.verdict || o.Verdict == format.Refused && o.Scope != tt.scope {
				t.Fatalf("outcome %v scope %v (%s), want %v scope %v", o.Verdict, o.Scope, o.Reason, tt.verdict, tt.scope)
			}
			if tt.want == nil {
				return
			}
			got := map[string]map[string]string{}
			for c, ds := range h {
				k := c.Kind + " " + c.RoomType + " " + c.RatePlan
				got[k] = map[string]string{}
				for d, v := range ds {
					b, _ := json.Marshal(v)
					got[k][d] = string(b)
				}
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tt.want)
			if string(gb) != string(wb) {
				t.Errorf("holding\n got %s\nwant %s", gb, wb)
			}
		})
	}
}
