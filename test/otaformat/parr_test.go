package otaformat_test

import (
	"encoding/json"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/test/otaformat"
)

// The parity read both ways: what fleetbucket's expedia-ar reader asks,
// read as the vendor does; and the vendor's answer, read back by the
// reader into the cells the AR encoder writes from. The two sides share
// no code.
func TestExpediaPARRRoundTrip(t *testing.T) {
	r, err := format.ReaderOf(format.ExpediaAR)
	if err != nil {
		t.Fatal(err)
	}
	q := format.ReadQuery{HotelRef: "H-9", From: "2027-03-01", To: "2027-03-02", Secret: format.NewSecret("cm:pw")}
	req, err := r.EncodeRead(q)
	if err != nil {
		t.Fatal(err)
	}
	got, err := otaformat.DecodeExpediaPARR(req.Body)
	if want := (otaformat.Read{User: "cm", Password: "pw", Hotel: "H-9", From: "2027-03-01", To: "2027-03-02"}); err != nil || got != want {
		t.Fatalf("the vendor read %+v, %v; want %+v", got, err, want)
	}
	held := map[string]map[otaformat.Product]map[string]any{
		"2027-03-01": {
			{RoomType: "R1"}:                 {"available": 4, "closed": false},
			{RoomType: "R1", RatePlan: "P1"}: {"closed": true, "amount": "99.90", "currency": "USD", "min_los": 2, "max_los": 7, "closed_to_arrival": true, "closed_to_departure": false},
		},
		"2027-03-02": {{RoomType: "R1", RatePlan: "P1"}: {"amount": "101", "currency": "USD"}},
		"2027-03-03": {{RoomType: "R1"}: {"available": 1}}, // outside the window
	}
	h, o := r.DecodeRead(q, format.Response{Status: 200, Body: otaformat.AnswerExpediaPARR(nil, q.From, q.To, held)})
	if o.Verdict != format.Accepted {
		t.Fatalf("outcome %v: %s", o.Verdict, o.Reason)
	}
	gotJSON := map[string]string{}
	for c, days := range h {
		for d, v := range days {
			b, _ := json.Marshal(v)
			gotJSON[c.Kind+" "+c.RoomType+" "+c.RatePlan+" "+d] = string(b)
		}
	}
	want := map[string]string{
		"availability R1  2027-03-01":   `{"available":4,"closed":false}`,
		"availability R1 P1 2027-03-01": `{"closed":true}`,
		"rates R1 P1 2027-03-01":        `{"amount":"99.90","currency":"USD"}`,
		"restrictions R1 P1 2027-03-01": `{"closed":true,"min_los":2,"max_los":7,"closed_to_arrival":true,"closed_to_departure":false}`,
		"availability R1  2027-03-02":   `{}`,
		"availability R1 P1 2027-03-02": `{}`,
		"rates R1 P1 2027-03-02":        `{"amount":"101","currency":"USD"}`,
		"restrictions R1 P1 2027-03-02": `{}`,
	}
	gb, _ := json.Marshal(gotJSON)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("read back\n got %s\nwant %s", gb, wb)
	}
	refused, o := r.DecodeRead(q, format.Response{Status: 200, Body: otaformat.AnswerExpediaPARR(otaformat.ExpediaARBadLogin(), "", "", nil)})
	if refused != nil || o.Verdict != format.Refused {
		t.Errorf("a bad login: %v %v, want refused with nothing held", refused, o.Verdict)
	}
}
