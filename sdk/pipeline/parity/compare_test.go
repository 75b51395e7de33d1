package parity

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

func ip(n int) *int   { return &n }
func bp(b bool) *bool { return &b }
func day(date string, seq int64, values string) ari.Day {
	return ari.Day{Date: date, Sequence: seq, Values: json.RawMessage(values)}
}

func TestCompare(t *testing.T) {
	avail := Cell{Kind: "availability", RoomType: "DBL"}
	rates := Cell{Kind: "rates", RoomType: "DBL", RatePlan: "BAR"}
	restr := Cell{Kind: "restrictions", RoomType: "DBL", RatePlan: "BAR"}
	heldAvail := format.HeldCell{Kind: "availability", RoomType: "R1"}
	heldRates := format.HeldCell{Kind: "rates", RoomType: "R1", RatePlan: "P1"}
	heldRestr := format.HeldCell{Kind: "restrictions", RoomType: "R1", RatePlan: "P1"}
	codes := format.Codes{RoomTypes: map[string]string{"DBL": "R1"}, RatePlans: map[string]string{"BAR": "P1"}}
	tests := []struct {
		name    string
		stored  map[Cell][]ari.Day
		held    format.Holding
		codes   format.Codes
		days    int
		drifted map[string][]string // "kind room plan date" → fields
		skipped int
	}{
		{
			name:   "the OTA holds what is stored, amounts as numbers, its own fields aside",
			stored: map[Cell][]ari.Day{avail: {day("2027-01-10", 3, `{"available":5}`)}, rates: {day("2027-01-10", 4, `{"amount":"129.5","currency":"EUR"}`)}},
			held: format.Holding{
				heldAvail: {"2027-01-10": {Available: ip(5), Closed: bp(false)}},
				heldRates: {"2027-01-10": {Amount: "129.50", Currency: "EUR"}},
			},
			codes: codes, days: 2, drifted: map[string][]string{},
		},
		{
			name:   "a count edited by hand, a rate missing, a restriction changed",
			stored: map[Cell][]ari.Day{avail: {day("2027-01-10", 3, `{"available":5}`), day("2027-01-11", 3, `{"available":5}`)}, rates: {day("2027-01-10", 4, `{"amount":"129.5","currency":"EUR"}`)}, restr: {day("2027-01-10", 5, `{"min_los":2,"closed":false}`)}},
			held: format.Holding{
				heldAvail: {"2027-01-10": {Available: ip(9)}, "2027-01-11": {Available: ip(5)}},
				heldRestr: {"2027-01-10": {MinLOS: ip(3), Closed: bp(false)}},
			},
			codes: codes, days: 4,
			drifted: map[string][]string{
				"availability DBL  2027-01-10":    {"available"},
				"rates DBL BAR 2027-01-10":        {"amount", "currency"},
				"restrictions DBL BAR 2027-01-10": {"min_los"},
			},
		},
		{
			name:    "codes pass through without a mapping; an unmapped code is skipped, not drift",
			stored:  map[Cell][]ari.Day{{Kind: "availability", RoomType: "R1"}: {day("2027-01-10", 1, `{"closed":true}`)}, {Kind: "availability", RoomType: "SUI"}: {day("2027-01-10", 1, `{"closed":true}`)}},
			held:    format.Holding{heldAvail: {"2027-01-10": {Closed: bp(true)}}},
			codes:   format.Codes{RoomTypes: map[string]string{"R1": "R1"}},
			days:    1,
			drifted: map[string][]string{},
			skipped: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compare(tt.stored, tt.held, tt.codes)
			drifted := map[string][]string{}
			for _, d := range got.Drifted {
				drifted[strings.Join([]string{d.Kind, d.RoomType, d.RatePlan, d.Date}, " ")] = d.Fields
			}
			if got.Days != tt.days || !reflect.DeepEqual(drifted, tt.drifted) || len(got.Skipped) != tt.skipped {
				t.Errorf("Compare: %d days, drifted %v, skipped %v; want %d days, drifted %v, %d skipped", got.Days, drifted, got.Skipped, tt.days, tt.drifted, tt.skipped)
			}
		})
	}
}

func TestRepairChanges(t *testing.T) {
	a := Cell{Kind: "availability", RoomType: "DBL"}
	b := Cell{Kind: "availability", RoomType: "SGL"}
	d := func(c Cell, date string, seq int64, v string) Drift {
		return Drift{Cell: c, Date: date, Sequence: seq, Stored: json.RawMessage(v)}
	}
	drifts := []Drift{
		d(a, "2027-01-10", 3, `{"available":5}`), d(a, "2027-01-11", 3, `{"available":5}`), d(a, "2027-01-12", 3, `{"available":5}`),
		d(a, "2027-01-13", 4, `{"available":5}`), // another change's
		d(a, "2027-01-15", 4, `{"available":5}`), // not the next date
		d(b, "2027-01-16", 4, `{"available":5}`), // another cell
	}
	got, err := RepairChanges("hotel-aurora", "r1", drifts, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"DBL 2027-01-10..2027-01-11 #3", "DBL 2027-01-12..2027-01-12 #3", "DBL 2027-01-13..2027-01-13 #4", "DBL 2027-01-15..2027-01-15 #4", "SGL 2027-01-16..2027-01-16 #4"}
	var have []string
	for i, c := range got {
		if err := c.Validate(2); err != nil {
			t.Errorf("change %d: %v", i, err)
		}
		if c.PropertyID != "hotel-aurora" || c.Values["available"] != 5.0 || c.EventID == "" {
			t.Errorf("change %d: %+v", i, c)
		}
		have = append(have, c.RoomType+" "+c.From+".."+c.To+" #"+string(rune('0'+c.Sequence)))
	}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("changes\n got %v\nwant %v", have, want)
	}
}

func TestWindows(t *testing.T) {
	got := windows("2027-01-30", "2027-03-03", 31)
	want := [][2]string{{"2027-01-30", "2027-03-01"}, {"2027-03-02", "2027-03-03"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("windows = %v, want %v", got, want)
	}
}
