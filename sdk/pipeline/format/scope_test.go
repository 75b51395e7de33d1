package format_test

import (
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// A refusal says what it is about, and only an item's or the message's can
// be a change's fault: the codes as the vendors document them (Expedia EQC
// error messaging; OpenTravel's EWT and ERR lists as Booking.com and
// SiteMinder publish them; Booking.com's 401 and 403).
func TestRefusalScope(t *testing.T) {
	otaRS := func(inner string) []byte {
		return []byte(`<?xml version="1.0" encoding="UTF-8"?><OTA_HotelAvailNotifRS xmlns="http://www.opentravel.org/OTA/2003/05" Version="1.0">` + inner + `</OTA_HotelAvailNotifRS>`)
	}
	arRS := func(inner string) []byte {
		return []byte(`<?xml version="1.0" encoding="UTF-8"?><AvailRateUpdateRS xmlns="http://www.expediaconnect.com/EQC/AR/2011/06">` + inner + `</AvailRateUpdateRS>`)
	}
	const soapFault = `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><soap:Fault><faultcode>soap:Client</faultcode><faultstring>Hotel is not connected</faultstring></soap:Fault></soap:Body></soap:Envelope>`
	tests := []struct {
		name    string
		format  string
		status  int
		body    []byte
		verdict format.Verdict
		scope   otapush.Scope
	}{
		{"expedia 1000 access denied in a 200", format.ExpediaAR, 200, arRS(`<Error code="1000">Access denied</Error>`), format.Refused, otapush.ScopeCredential},
		{"expedia 1001 bad login in a 200", format.ExpediaAR, 200, arRS(`<Error code="1001">Authentication error: invalid username or password</Error>`), format.Refused, otapush.ScopeCredential},
		{"expedia 1003 access level in a 200", format.ExpediaAR, 200, arRS(`<Error code="1003">The user account provided doesn't have the right access level</Error>`), format.Refused, otapush.ScopeCredential},
		{"expedia credential beside a business error", format.ExpediaAR, 200, arRS(`<Error code="3202">Room type not mapped</Error><Error code="1001">invalid password</Error>`), format.Refused, otapush.ScopeCredential},
		{"expedia 2002 parsing", format.ExpediaAR, 200, arRS(`<Error code="2002">Parsing error</Error>`), format.Refused, otapush.ScopeMessage},
		{"expedia 3015 business", format.ExpediaAR, 200, arRS(`<Error code="3015">MaxLOS smaller than MinLOS</Error>`), format.Refused, otapush.ScopeMessage},
		{"expedia 3202 unmapped room", format.ExpediaAR, 200, arRS(`<Error code="3202">Room type 9 is not mapped</Error>`), format.Refused, otapush.ScopeMessage},
		{"expedia 3210 retry", format.ExpediaAR, 200, arRS(`<Error code="3210">Connection refused</Error>`), format.Transient, 0},
		{"expedia 4000s on Expedia's side", format.ExpediaAR, 200, arRS(`<Error code="4001">Internal error</Error>`), format.Transient, 0},
		{"expedia 401", format.ExpediaAR, 401, nil, format.Refused, otapush.ScopeCredential},
		{"expedia 403 with an XML body: hotel not authorised", format.ExpediaAR, 403, arRS(`<Error code="1000">not authorized to manage this property</Error>`), format.Refused, otapush.ScopeHotel},
		{"expedia SOAP fault", format.ExpediaAR, 400, []byte(soapFault), format.Refused, otapush.ScopeHotel},

		{"opentravel authentication (EWT 4) in a 200", format.OpenTravel, 200, otaRS(`<Errors><Error Type="4" Code="448" ShortText="Invalid Username and/or Password"/></Errors>`), format.Refused, otapush.ScopeCredential},
		{"opentravel authentication timeout (EWT 5)", format.OpenTravel, 200, otaRS(`<Errors><Error Type="5" Code="448" ShortText="Credentials expired"/></Errors>`), format.Refused, otapush.ScopeCredential},
		{"opentravel authorization (EWT 6): no access to the hotel", format.OpenTravel, 200, otaRS(`<Errors><Error Type="6" Code="497" ShortText="You do not have access to hotel:1000001"/></Errors>`), format.Refused, otapush.ScopeHotel},
		{"opentravel 392 invalid hotel code", format.OpenTravel, 200, otaRS(`<Errors><Error Type="3" Code="392" ShortText="Hotel not found for HotelCode=1000001"/></Errors>`), format.Refused, otapush.ScopeHotel},
		{"opentravel 375 hotel not active", format.OpenTravel, 200, otaRS(`<Errors><Error Type="3" Code="375" ShortText="Hotel not active"/></Errors>`), format.Refused, otapush.ScopeHotel},
		{"opentravel hotel beside a named part", format.OpenTravel, 200, otaRS(`<Errors><Error Type="3" Code="402" RecordID="1" ShortText="bad room"/><Error Type="3" Code="375" ShortText="Hotel not active"/></Errors>`), format.Refused, otapush.ScopeHotel},
		{"opentravel error naming a part", format.OpenTravel, 200, otaRS(`<Errors><Error Type="3" Code="402" RecordID="1" ShortText="Room ID is not valid"/></Errors>`), format.Refused, otapush.ScopeItem},
		{"opentravel business error naming nothing", format.OpenTravel, 400, otaRS(`<Errors><Error Type="3" Code="NOT_A_VALID_DATE" ShortText="too far in the past"/></Errors>`), format.Refused, otapush.ScopeMessage},
		{"opentravel 401 (Booking.com: credentials)", format.OpenTravel, 401, nil, format.Refused, otapush.ScopeCredential},
		{"opentravel 403 (Booking.com: no access to the hotel, or no longer connected)", format.OpenTravel, 403, otaRS(`<Errors><Error Type="6" Code="497" ShortText="You do not have access to hotel:1000001"/></Errors>`), format.Refused, otapush.ScopeHotel},
		{"opentravel SOAP fault", format.OpenTravel, 400, []byte(soapFault), format.Refused, otapush.ScopeHotel},

		{"json 401", format.JSON, 401, nil, format.Refused, otapush.ScopeCredential},
		{"json 403", format.JSON, 403, nil, format.Refused, otapush.ScopeCredential},
		{"json 422", format.JSON, 422, []byte(`{"error":"unknown room"}`), format.Refused, otapush.ScopeMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := encodeOne(t, tt.format)
			got := lookup(t, tt.format).Decode(req, format.Response{Status: tt.status, Body: tt.body})
			if got.Verdict != tt.verdict || got.Scope != tt.scope {
				t.Fatalf("Decode = %s about the %s (%q), want %s about the %s", got.Verdict, got.Scope, got.Reason, tt.verdict, tt.scope)
			}
			if isolable := got.Verdict == format.Refused && got.Scope.Isolable(); isolable != (tt.scope == otapush.ScopeItem || tt.scope == otapush.ScopeMessage) {
				t.Fatalf("isolable %v for a refusal about the %s", isolable, got.Scope)
			}
		})
	}
}

// maxJudgedBody is otapush's cap on the answer a Judge reads (64 KB).
const maxJudgedBody = 64 << 10

// An answer longer than the pipeline reads is judged by what came before
// the cut: the vendors put <Success/> or <Errors> first, so a long list of
// warnings still clears what was applied, and a long list of errors still
// refuses. An answer cut before anything decided it is not retried as it
// is (it would come back as long): it pauses the lane as the connection's,
// keeping every change.
func TestAnswerOverTheReadLimit(t *testing.T) {
	long := func(head, item, tail string) []byte {
		b := []byte(head)
		for len(b) <= maxJudgedBody {
			b = append(b, item...)
		}
		return append(b, tail...)[:maxJudgedBody]
	}
	const otaHead = `<?xml version="1.0" encoding="UTF-8"?><OTA_HotelAvailNotifRS xmlns="http://www.opentravel.org/OTA/2003/05" Version="1.0">`
	const arHead = `<?xml version="1.0" encoding="UTF-8"?><AvailRateUpdateRS xmlns="http://www.expediaconnect.com/EQC/AR/2011/06">`
	tests := []struct {
		name    string
		format  string
		body    []byte
		verdict format.Verdict
		scope   otapush.Scope
	}{
		{"opentravel success, then warnings past the cut", format.OpenTravel,
			long(otaHead+`<Success/><Warnings>`, `<Warning Type="3" Code="WARN_DUPLICATE_DATES" Status="Processed" ShortText="duplicate dates, the first applied"/>`, ``),
			format.AcceptedWithWarnings, 0},
		{"opentravel errors past the cut", format.OpenTravel,
			long(otaHead+`<Errors>`, `<Error Type="3" Code="NOT_A_VALID_DATE" Status="NotProcessed" ShortText="too far in the past"/>`, ``),
			format.Refused, otapush.ScopeMessage},
		{"opentravel credential refused, then errors past the cut", format.OpenTravel,
			long(otaHead+`<Errors><Error Type="4" Code="448" ShortText="Invalid Username and/or Password"/>`, `<Error Type="3" Code="NOT_A_VALID_DATE" ShortText="x"/>`, ``),
			format.Refused, otapush.ScopeCredential},
		{"opentravel nothing decisive before the cut", format.OpenTravel,
			long(otaHead+`<POS>`, `<Source><RequestorID ID="1"/></Source>`, ``),
			format.Refused, otapush.ScopeHotel},
		{"expedia success, then warnings past the cut", format.ExpediaAR,
			long(arHead+`<Success/>`, `<Warning code="4100">Rate change above the verification threshold</Warning>`, ``),
			format.AcceptedWithWarnings, 0},
		{"expedia errors past the cut", format.ExpediaAR,
			long(arHead, `<Error code="3202">Room type 9 is not mapped</Error>`, ``),
			format.Refused, otapush.ScopeMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.body) != maxJudgedBody {
				t.Fatalf("body of %d bytes, want the cut at %d", len(tt.body), maxJudgedBody)
			}
			got := lookup(t, tt.format).Decode(encodeOne(t, tt.format), format.Response{Status: 200, Body: tt.body})
			if got.Verdict != tt.verdict || got.Scope != tt.scope {
				t.Fatalf("Decode = %s about the %s (%.200q), want %s about the %s", got.Verdict, got.Scope, got.Reason, tt.verdict, tt.scope)
			}
			said := got.Reason
			if got.Verdict.Applied() {
				if len(got.Warnings) < 2 {
					t.Fatalf("accepted with %d warnings, want those read before the cut and the cut's", len(got.Warnings))
				}
				said = got.Warnings[len(got.Warnings)-1]
			}
			if !strings.Contains(said, "cut after 65536 bytes") {
				t.Fatalf("the outcome does not say the answer was cut: %.300q", said)
			}
		})
	}
}

// encodeOne is a one-cell request in the named format.
func encodeOne(t *testing.T, name string) format.Request {
	t.Helper()
	w := format.Work{HotelRef: "1000001", Kind: "availability", Cells: []format.Cell{{RoomType: "101", Days: days("2027-03-01", "2027-03-02", `{"available":5}`)}}}
	switch name {
	case format.OpenTravel:
		w.Secret = bxml
	case format.ExpediaAR:
		w.Secret = eqc
	}
	req, err := lookup(t, name).Encode(w)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
