package sim

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestDecodePushAgreesWithEncodingJSON checks decodePush against
// json.Unmarshal, on bodies the scanner reads itself and on bodies it
// must hand over.
func TestDecodePushAgreesWithEncodingJSON(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		scanned bool // the scanner reads it without json.Unmarshal
	}{
		{"a push as the json format renders it", `{"hotel_ref":"p0007","kind":"rates","items":[{"room_type":"DBL","rate_plan":"BAR","days":[{"date":"2027-01-05","sequence":1733000000000000123,"values":{"value":142}},{"date":"2027-01-06","sequence":9,"values":{"value":-3}}]},{"room_type":"TWN","days":[]}]}`, true},
		{"spaces and newlines", " {\n\t\"hotel_ref\" : \"p1\" ,\r\n \"items\" : [ { \"days\" : [ { \"values\" : { } } ] } ] } ", true},
		{"empty", `{}`, true},
		{"a key twice: the last wins", `{"kind":"rates","kind":"availability"}`, true},
		{"the largest int32 value", `{"items":[{"days":[{"values":{"value":2147483647}}]}]}`, true},
		{"a value past int32", `{"items":[{"days":[{"values":{"value":2147483648}}]}]}`, false},
		{"a fraction", `{"items":[{"days":[{"sequence":1.5}]}]}`, false},
		{"an exponent", `{"items":[{"days":[{"sequence":1e3}]}]}`, false},
		{"a leading zero", `{"items":[{"days":[{"sequence":012}]}]}`, false},
		{"an escape", `{"hotel_ref":"p\u0030"}`, false},
		{"a key in other case", `{"Hotel_Ref":"p1"}`, false},
		{"another field", `{"hotel_ref":"p1","extra":[1,2]}`, false},
		{"a null value", `{"items":[{"days":[{"values":{"value":null}}]}]}`, false},
		{"null items", `{"items":null}`, false},
		{"a number for a string", `{"kind":7}`, false},
		{"not UTF-8", "{\"kind\":\"r\xffs\"}", false},
		{"trailing text", `{"kind":"rates"} x`, false},
		{"cut short", `{"kind":"rates","items":[{"days":[`, false},
		{"not an object", `[]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := pushScanner{b: []byte(tc.body)}
			_, scanned := s.push()
			if scanned != tc.scanned {
				t.Errorf("scanned %v, want %v", scanned, tc.scanned)
			}
			got, gotErr := decodePush([]byte(tc.body))
			var want pushBody
			wantErr := json.Unmarshal([]byte(tc.body), &want)
			if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) {
				t.Errorf("decodePush: %+v, %v; json.Unmarshal: %+v, %v", got, gotErr, want, wantErr)
			}
		})
	}
}

// TestReadBodyWhateverTheLength checks readBody returns the whole body
// whether the request's length is right, short, long or unknown.
func TestReadBodyWhateverTheLength(t *testing.T) {
	const body = `{"kind":"rates"}`
	for _, n := range []int64{int64(len(body)), 3, 100, -1, 0} {
		r, err := http.NewRequest(http.MethodPost, "http://booking.sim/v1/rates", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.ContentLength = n
		if got := string(readBody(r)); got != body {
			t.Errorf("length %d: read %q, want %q", n, got, body)
		}
	}
}
