package format

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
)

func TestCodesMap(t *testing.T) {
	codes := Codes{RoomTypes: map[string]string{"DBL": "1001"}, RatePlans: map[string]string{"BAR": "2001"}}
	for _, tc := range []struct {
		name             string
		codes            Codes
		room, plan       string
		wantRoom, wantRP string
		unmapped         string
	}{
		{"both mapped", codes, "DBL", "BAR", "1001", "2001", ""},
		{"room type's availability needs no plan", codes, "DBL", "", "1001", "", ""},
		{"unmapped room", codes, "SUI", "BAR", "", "", `room type "SUI"`},
		{"unmapped plan", codes, "DBL", "NRF", "", "", `rate plan "NRF"`},
		{"no mapping passes codes through", Codes{}, "SUI", "NRF", "SUI", "NRF", ""},
		{"rooms mapped, plans passed through", Codes{RoomTypes: codes.RoomTypes}, "DBL", "NRF", "1001", "NRF", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room, plan, err := tc.codes.Map(tc.room, tc.plan)
			if tc.unmapped != "" {
				if !errors.Is(err, ErrUnmapped) || !strings.Contains(err.Error(), tc.unmapped) {
					t.Fatalf("Map: %v, want an unmapped error naming %s", err, tc.unmapped)
				}
				return
			}
			if err != nil || room != tc.wantRoom || plan != tc.wantRP {
				t.Fatalf("Map = %q, %q, %v; want %q, %q", room, plan, err, tc.wantRoom, tc.wantRP)
			}
		})
	}
}

// Encode sends the OTA's ids while the requests' Work keeps the PMS codes
// the lane holds (what a refusal is mapped back to).
func TestEncodeSendsMappedIDs(t *testing.T) {
	f, _ := Lookup(OpenTravel)
	w := Work{HotelRef: "H", Kind: "availability", Secret: NewSecret("user:pw"), Codes: Codes{RoomTypes: map[string]string{"DBL": "1001"}, RatePlans: map[string]string{"BAR": "2001"}},
		Cells: []Cell{{RoomType: "DBL", RatePlan: "BAR", Days: []ari.Day{{Date: "2026-12-01", Sequence: 1, Values: []byte(`{"available":3}`)}}}}}
	reqs, err := Encode(f, w, Shape{})
	if err != nil || len(reqs) != 1 {
		t.Fatalf("Encode: %d requests, %v", len(reqs), err)
	}
	body := string(reqs[0].Body)
	if !strings.Contains(body, `InvTypeCode="1001"`) || !strings.Contains(body, `RatePlanCode="2001"`) || strings.Contains(body, `"DBL"`) {
		t.Fatalf("body does not carry the OTA's ids alone: %s", body)
	}
	if c := reqs[0].Work.Cells[0]; c.RoomType != "DBL" || c.RatePlan != "BAR" {
		t.Fatalf("the request's work names %s/%s, want the PMS codes DBL/BAR", c.RoomType, c.RatePlan)
	}
	w.Cells[0].RoomType = "SUI"
	if _, err := Encode(f, w, Shape{}); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("Encode of an unmapped room: %v, want ErrUnmapped", err)
	}
}
