package format_test

import (
	"encoding/base64"
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

var bxml = format.NewSecret("channel-mgr:s3cr&t<pw")

// The examples follow the structure Booking.com documents for
// OTA_HotelAvailNotif and OTA_HotelRateAmountNotif (developers.booking.com
// /connectivity/docs/ota-hotelavailnotif, …/ota-rateamountnotif), written
// here in our own words and values.
func TestOpenTravelEncode(t *testing.T) {
	tests := []struct {
		name string
		work format.Work
		want []string // one document per request, in order
	}{
		{
			name: "rooms to sell, equal dates merged into one range",
			work: format.Work{HotelRef: "1000001", Kind: "availability", Cells: []format.Cell{
				{RoomType: "100000101", Days: append(days("2027-03-01", "2027-03-04", `{"available":5}`), day("2027-03-05", `{"available":4}`))},
			}},
			want: []string{`<?xml version="1.0" encoding="UTF-8"?>
<OTA_HotelAvailNotifRQ xmlns="http://www.opentravel.org/OTA/2003/05" Version="1.0">
  <AvailStatusMessages HotelCode="1000001">
    <AvailStatusMessage LocatorID="1" BookingLimit="5">
      <StatusApplicationControl Start="2027-03-01" End="2027-03-04" InvTypeCode="100000101"/>
    </AvailStatusMessage>
    <AvailStatusMessage LocatorID="2" BookingLimit="4">
      <StatusApplicationControl Start="2027-03-05" End="2027-03-05" InvTypeCode="100000101"/>
    </AvailStatusMessage>
  </AvailStatusMessages>
</OTA_HotelAvailNotifRQ>`},
		},
		{
			name: "stop-sell of a room type is a master RestrictionStatus",
			work: format.Work{HotelRef: "1000001", Kind: "availability", Cells: []format.Cell{
				{RoomType: "100000101", Days: days("2027-03-10", "2027-03-11", `{"closed":true}`)},
			}},
			want: []string{`<OTA_HotelAvailNotifRQ xmlns="http://www.opentravel.org/OTA/2003/05" Version="1.0">
  <AvailStatusMessages HotelCode="1000001">
    <AvailStatusMessage LocatorID="1">
      <StatusApplicationControl Start="2027-03-10" End="2027-03-11" InvTypeCode="100000101"/>
      <RestrictionStatus Status="Close"/>
    </AvailStatusMessage>
  </AvailStatusMessages>
</OTA_HotelAvailNotifRQ>`},
		},
		{
			name: "restrictions of a room rate: stays, then one RestrictionStatus per message",
			work: format.Work{HotelRef: "1000001", Kind: "restrictions", Cells: []format.Cell{
				{RoomType: "100000101", RatePlan: "2000002", Days: days("2027-04-02", "2027-04-03",
					`{"min_los":2,"max_los":7,"closed":false,"closed_to_arrival":true,"closed_to_departure":false}`)},
			}},
			want: []string{`<OTA_HotelAvailNotifRQ xmlns="http://www.opentravel.org/OTA/2003/05" Version="1.0">
  <AvailStatusMessages HotelCode="1000001">
    <AvailStatusMessage LocatorID="1">
      <StatusApplicationControl Start="2027-04-02" End="2027-04-03" InvTypeCode="100000101" RatePlanCode="2000002"/>
      <LengthsOfStay>
        <LengthOfStay Time="2" MinMaxMessageType="SetMinLOS"/>
        <LengthOfStay Time="7" MinMaxMessageType="SetMaxLOS"/>
      </LengthsOfStay>
      <RestrictionStatus Status="Open"/>
    </AvailStatusMessage>
    <AvailStatusMessage LocatorID="2">
      <StatusApplicationControl Start="2027-04-02" End="2027-04-03" InvTypeCode="100000101" RatePlanCode="2000002"/>
      <RestrictionStatus Status="Close" Restriction="Arrival"/>
    </AvailStatusMessage>
    <AvailStatusMessage LocatorID="3">
      <StatusApplicationControl Start="2027-04-02" End="2027-04-03" InvTypeCode="100000101" RatePlanCode="2000002"/>
      <RestrictionStatus Status="Open" Restriction="Departure"/>
    </AvailStatusMessage>
  </AvailStatusMessages>
</OTA_HotelAvailNotifRQ>`},
		},
		{
			name: "rates by guests, two room rates in one message",
			work: format.Work{HotelRef: "1000001", Kind: "rates", Cells: []format.Cell{
				{RoomType: "100000101", RatePlan: "2000002", Days: days("2027-05-01", "2027-05-02", `{"amount":"119.50","currency":"EUR","guests":2}`)},
				{RoomType: "100000102", RatePlan: "2000002", Days: []ari.Day{day("2027-05-01", `{"amount":99,"currency":"EUR"}`)}},
			}},
			want: []string{`<OTA_HotelRateAmountNotifRQ xmlns="http://www.opentravel.org/OTA/2003/05" Version="1.0">
  <RateAmountMessages HotelCode="1000001">
    <RateAmountMessage LocatorID="1">
      <StatusApplicationControl Start="2027-05-01" End="2027-05-02" InvTypeCode="100000101" RatePlanCode="2000002"/>
      <Rates><Rate><BaseByGuestAmts>
        <BaseByGuestAmt AmountAfterTax="119.50" CurrencyCode="EUR" NumberOfGuests="2"/>
      </BaseByGuestAmts></Rate></Rates>
    </RateAmountMessage>
    <RateAmountMessage LocatorID="2">
      <StatusApplicationControl Start="2027-05-01" End="2027-05-01" InvTypeCode="100000102" RatePlanCode="2000002"/>
      <Rates><Rate><BaseByGuestAmts>
        <BaseByGuestAmt AmountAfterTax="99" CurrencyCode="EUR"/>
      </BaseByGuestAmts></Rate></Rates>
    </RateAmountMessage>
  </RateAmountMessages>
</OTA_HotelRateAmountNotifRQ>`},
		},
		{
			name: "one calendar month per request by default",
			work: format.Work{HotelRef: "1000001", Kind: "availability", Cells: []format.Cell{
				{RoomType: "100000101", Days: days("2027-01-30", "2027-02-01", `{"available":2}`)},
			}},
			want: []string{`<OTA_HotelAvailNotifRQ xmlns="http://www.opentravel.org/OTA/2003/05" Version="1.0">
  <AvailStatusMessages HotelCode="1000001">
    <AvailStatusMessage LocatorID="1" BookingLimit="2">
      <StatusApplicationControl Start="2027-01-30" End="2027-01-31" InvTypeCode="100000101"/>
    </AvailStatusMessage>
  </AvailStatusMessages>
</OTA_HotelAvailNotifRQ>`, `<OTA_HotelAvailNotifRQ xmlns="http://www.opentravel.org/OTA/2003/05" Version="1.0">
  <AvailStatusMessages HotelCode="1000001">
    <AvailStatusMessage LocatorID="1" BookingLimit="2">
      <StatusApplicationControl Start="2027-02-01" End="2027-02-01" InvTypeCode="100000101"/>
    </AvailStatusMessage>
  </AvailStatusMessages>
</OTA_HotelAvailNotifRQ>`},
		},
	}
	f := lookup(t, format.OpenTravel)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.work.Secret = bxml
			reqs, err := format.Encode(f, tt.work, format.Shape{})
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != len(tt.want) {
				t.Fatalf("%d requests, want %d", len(reqs), len(tt.want))
			}
			for i, r := range reqs {
				if got, want := canon(t, r.Body), canon(t, []byte(tt.want[i])); got != want {
					t.Errorf("request %d:\n%s\nwant\n%s", i, got, want)
				}
				if !strings.HasPrefix(string(r.Body), `<?xml version="1.0" encoding="UTF-8"?>`) {
					t.Errorf("request %d has no XML declaration", i)
				}
				wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("channel-mgr:s3cr&t<pw"))
				if r.Method != http.MethodPost || r.Header.Get("Authorization") != wantAuth || r.Header.Get("Content-Type") != "application/xml" {
					t.Errorf("request %d: %s, headers %v", i, r.Method, r.Redacted().Header)
				}
			}
		})
	}
}

// The echo token is stable for one message (a retry carries the same) and
// differs between messages.
func TestOpenTravelEchoToken(t *testing.T) {
	f := lookup(t, format.OpenTravel)
	w := format.Work{HotelRef: "1", Kind: "availability", Secret: bxml, Cells: []format.Cell{{RoomType: "R", Days: days("2027-01-01", "2027-01-02", `{"available":1}`)}}}
	a, _ := f.Encode(w)
	b, _ := f.Encode(w)
	w.Cells[0].Days = days("2027-01-01", "2027-01-02", `{"available":2}`)
	c, _ := f.Encode(w)
	if string(a.Body) != string(b.Body) || string(a.Body) == string(c.Body) || !strings.Contains(string(a.Body), `EchoToken="`) {
		t.Fatalf("echo tokens: %s / %s / %s", a.Body, b.Body, c.Body)
	}
}

func TestOpenTravelUnexpressible(t *testing.T) {
	f := lookup(t, format.OpenTravel)
	tests := []struct {
		name, kind, plan, values, want string
	}{
		{"a rate without a rate plan", "rates", "", `{"amount":"10.00"}`, "a rate needs a rate plan"},
		{"a key outside the vocabulary", "availability", "", `{"value":3}`, `"value" is not a availability value`},
		{"a negative count", "availability", "", `{"available":-1}`, "want an integer 0..1073741824"},
		{"an amount that is not a decimal", "rates", "BAR", `{"amount":"12,50"}`, "want a decimal"},
		{"min over max", "restrictions", "BAR", `{"min_los":5,"max_los":2}`, "min_los 5 is over max_los 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := format.Work{HotelRef: "1", Kind: tt.kind, Secret: bxml, Cells: []format.Cell{{RoomType: "R", RatePlan: tt.plan, Days: []ari.Day{day("2027-01-01", tt.values)}}}}
			_, err := format.Encode(f, w, format.Shape{})
			var ue *format.UnexpressibleError
			if !errors.Is(err, format.ErrUnexpressible) || !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Encode = %v, want an UnexpressibleError saying %q", err, tt.want)
			}
			if ue.Date != "2027-01-01" || ue.RoomType != "R" {
				t.Errorf("the error names %s %s", ue.RoomType, ue.Date)
			}
		})
	}
	w := format.Work{HotelRef: "1", Kind: "availability", Secret: format.NewSecret("a-token-only"), Cells: []format.Cell{{RoomType: "R", Days: []ari.Day{day("2027-01-01", `{"available":1}`)}}}}
	if _, err := format.Encode(f, w, format.Shape{}); !errors.Is(err, format.ErrNotUserPassword) || strings.Contains(err.Error(), "a-token-only") {
		t.Fatalf("Encode with a token secret = %v, want ErrNotUserPassword without the secret", err)
	}
}

// Answers as Booking.com documents them: 200 with <Success/>, with
// <Warnings>, or with <Errors> whose RecordID names the message part.
func TestOpenTravelDecode(t *testing.T) {
	f := lookup(t, format.OpenTravel)
	work := format.Work{HotelRef: "1000001", Kind: "availability", Secret: bxml, Cells: []format.Cell{
		{RoomType: "101", Days: days("2027-03-01", "2027-03-03", `{"available":5}`)},
		{RoomType: "999", Days: days("2027-03-02", "2027-03-02", `{"available":1}`)},
	}}
	req, err := f.Encode(work)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	rs := func(inner string) []byte {
		return []byte(`<?xml version="1.0" encoding="UTF-8"?><OTA_HotelAvailNotifRS xmlns="http://www.opentravel.org/OTA/2003/05" TimeStamp="2027-03-01T12:00:00" Version="1.0">` + inner + `</OTA_HotelAvailNotifRS>`)
	}
	tests := []struct {
		name   string
		status int
		header http.Header
		body   []byte
		want   format.Outcome
	}{
		{"success", 200, nil, rs(`<Success/>`), format.Outcome{Verdict: format.Accepted}},
		{"success with warnings", 200, nil, rs(`<Success/><Warnings><Warning Type="3" Code="WARN_DUPLICATE_DATES" ShortText="duplicate dates, the first applied" Status="Processed"/></Warnings>`),
			format.Outcome{Verdict: format.AcceptedWithWarnings, Warnings: []string{"WARN_DUPLICATE_DATES: duplicate dates, the first applied"}}},
		{"200 with an error naming the room's part", 200, nil, rs(`<Errors><Error Type="3" Code="402" RecordID="2" Status="NotProcessed" ShortText="Room ID '999' is not valid"/></Errors>`),
			format.Outcome{Verdict: format.Refused, Reason: "402: Room ID '999' is not valid", Scope: otapush.ScopeItem,
				Refused: []format.Cell{{RoomType: "999", Kind: "availability", Days: days("2027-03-02", "2027-03-02", `{"available":1}`)}}}},
		{"200 with an error naming nothing", 200, nil, rs(`<Errors><Error Type="3" Code="NOT_A_VALID_DATE">Some dates are too far in the past</Error></Errors>`),
			format.Outcome{Verdict: format.Refused, Reason: "NOT_A_VALID_DATE: Some dates are too far in the past", Scope: otapush.ScopeMessage}},
		{"an error naming a part the request does not have", 400, nil, rs(`<Errors><Error Code="402" RecordID="77" ShortText="bad"/></Errors>`),
			format.Outcome{Verdict: format.Refused, Reason: "402: bad", Scope: otapush.ScopeMessage}},
		{"system unavailable is transient", 200, nil, rs(`<Errors><Error Type="1" Code="187" ShortText="System currently unavailable"/></Errors>`),
			format.Outcome{Verdict: format.Transient, Reason: "187: System currently unavailable"}},
		{"200 that is not OpenTravel", 200, nil, []byte(`<html>maintenance</html>`),
			format.Outcome{Verdict: format.Transient, Reason: "HTTP 200 with no OpenTravel answer: <html>maintenance</html>"}},
		{"200 with neither Success nor Errors", 200, nil, rs(``),
			format.Outcome{Verdict: format.Transient, Reason: "OTA_HotelAvailNotifRS holds neither Success nor Errors"}},
		{"throttled with Retry-After", 429, http.Header{"Retry-After": {"7"}}, nil,
			format.Outcome{Verdict: format.Throttled, Reason: "HTTP 429", RetryAfter: 7 * time.Second}},
		{"throttled with an HTTP-date", 429, http.Header{"Retry-After": {at.Add(3 * time.Second).Format(http.TimeFormat)}}, nil,
			format.Outcome{Verdict: format.Throttled, Reason: "HTTP 429", RetryAfter: 3 * time.Second}},
		{"server error", 500, nil, []byte("INTERNAL_SERVER_ERROR"), format.Outcome{Verdict: format.Transient, Reason: "HTTP 500: INTERNAL_SERVER_ERROR"}},
		{"credential refused", 401, nil, nil, format.Outcome{Verdict: format.Refused, Reason: "HTTP 401: the vendor refused the credential: ", Scope: otapush.ScopeCredential}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := f.Decode(req, format.Response{Status: tt.status, Header: tt.header, Body: tt.body, Received: at})
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decode =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
