package format_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// upper is a user's own format: a plain-text body, registered without
// forking anything.
type upper struct{}

func (upper) Traits() format.Traits { return format.Traits{Credential: format.CredentialToken} }
func (upper) Encode(w format.Work) (format.Request, error) {
	return format.Request{Method: "PUT", Path: "/ari/" + w.HotelRef, Body: []byte(strings.ToUpper(w.Kind)), Work: w}, nil
}
func (upper) Decode(_ format.Request, r format.Response) format.Outcome {
	if string(r.Body) == "OK" {
		return format.Outcome{Verdict: format.Accepted}
	}
	return format.Outcome{Verdict: format.Refused, Reason: string(r.Body)}
}

func TestRegister(t *testing.T) {
	if _, done := format.Lookup("test-upper"); !done { // -count=2
		format.Register("test-upper", upper{})
	}
	f, ok := format.Lookup("test-upper")
	if !ok {
		t.Fatal("a registered format is not found")
	}
	reqs, err := format.Encode(f, format.Work{HotelRef: "H1", Kind: "rates", Cells: []format.Cell{{RoomType: "R", Days: days("2027-01-01", "2027-01-01", `{}`)}}}, format.Shape{})
	if err != nil || len(reqs) != 1 || reqs[0].Path != "/ari/H1" || string(reqs[0].Body) != "RATES" {
		t.Fatalf("Encode = %+v, %v", reqs, err)
	}
	if o := f.Decode(reqs[0], format.Response{Status: 200, Body: []byte("NO")}); o.Verdict != format.Refused {
		t.Fatalf("a 200 whose body says no: %v", o.Verdict)
	}
	for _, name := range []string{format.JSON, format.OpenTravel, format.ExpediaAR, "test-upper"} {
		if _, ok := format.Lookup(name); !ok {
			t.Errorf("%s is not registered", name)
		}
	}
	if names := format.Names(); !reflect.DeepEqual(names, []string{"expedia-ar", "json", "opentravel", "test-upper"}) {
		t.Errorf("Names = %v", names)
	}
	for _, tt := range []struct {
		name string
		f    format.Format
	}{{"test-upper", upper{}}, {"", upper{}}, {"nil", nil}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q, %v) did not panic", tt.name, tt.f)
				}
			}()
			format.Register(tt.name, tt.f)
		}()
	}
}
