package resync

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// state is a stored state written by hand: cell → dates held.
type state map[string][]string

func (s state) Read(_ context.Context, ranges []ari.Range) (map[string][]ari.Day, error) {
	out := map[string][]ari.Day{}
	for _, r := range ranges {
		for _, d := range s[r.Cell] {
			if d >= r.From && d <= r.To {
				out[r.Cell] = append(out[r.Cell], ari.Day{Date: d, Sequence: 7, Values: json.RawMessage(`{}`)})
			}
		}
	}
	return out, nil
}

func TestPlanPushesStoredRunsAndReportsCellsWithoutState(t *testing.T) {
	st := state{
		"h#rates#DBL#BAR": {"2027-01-01", "2027-01-02", "2027-01-03", "2027-01-05", "2027-02-01"},
		"h#rates#TWN#BAR": {"2027-01-31"},
	}
	r := ari.Resync{ResyncID: "rs", PropertyID: "h", From: "2027-01-01", To: "2027-01-31"}
	cells, err := Cells(r, config.Target{Channel: "ota", Codes: format.Codes{RoomTypes: map[string]string{"TWN": "2", "DBL": "1", "SUI": "3"}, RatePlans: map[string]string{"BAR": "B"}}}, "rates")
	if err != nil {
		t.Fatal(err)
	}
	p, err := PlanKind(context.Background(), st, r, "rates", cells)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(p.Elements), "[DBL#BAR#2027-01-01#2027-01-03#0 DBL#BAR#2027-01-05#2027-01-05#0 TWN#BAR#2027-01-31#2027-01-31#0]"; got != want {
		t.Errorf("elements %s, want %s", got, want)
	}
	if p.Cells != 2 || p.Dates != 5 || len(p.Missing) != 1 || p.Missing[0].RoomType != "SUI" || p.MissingDates != 31-4+31-1+31 {
		t.Errorf("plan %+v: want 2 cells, 5 dates, SUI missing, %d dates without state", p, 31-4+31-1+31)
	}
	for _, e := range p.Elements {
		if !e.Bulk() {
			t.Errorf("element %v is not bulk", e)
		}
	}
	if _, err := Cells(r, config.Target{Channel: "ota"}, "rates"); err == nil {
		t.Error("a connection that maps nothing gave cells; want an error asking for them")
	}
}

// TestWholeResyncReadsEachKindByItsFormatsKey: a resync reads each kind
// at the cells its channel's format holds it by, whether it names the
// cells or takes the connection's mapping.
// OpenTravel and Expedia AR hold availability per room type (a rate plan
// may only close on its own), so the room type's cell is read once, not
// once per rate plan, and it alone is reported missing; rates are per room
// type × rate plan; json passes codes through, so every kind is read per
// pair as the mapping names them, and per room type as a sparse cell: a
// PMS may send inventory per room type, which json pushes as it is.
func TestWholeResyncReadsEachKindByItsFormatsKey(t *testing.T) {
	st := state{
		"h#availability#DBL#":    {"2027-01-01", "2027-01-02"},
		"h#availability#DBL#BAR": {"2027-01-02"},
		"h#availability#TWN#NRF": {"2027-01-03"},
		"h#rates#DBL#BAR":        {"2027-01-01"},
		"h#rates#TWN#NRF":        {"2027-01-01"},
	}
	codes := format.Codes{RoomTypes: map[string]string{"DBL": "1", "TWN": "2"}, RatePlans: map[string]string{"BAR": "B", "NRF": "N"}}
	r := ari.Resync{ResyncID: "rs", PropertyID: "h", From: "2027-01-01", To: "2027-01-03"}
	tests := []struct {
		format, kind string
		named        []ari.ResyncCell // named; nil: the whole connection
		elements     string
		cells, dates int
		missing      string
		missingDates int
	}{
		{format.OpenTravel, "availability", nil, "[DBL##2027-01-01#2027-01-02#0 DBL#BAR#2027-01-02#2027-01-02#0 TWN#NRF#2027-01-03#2027-01-03#0]", 3, 4, "[{TWN   }]", 1 + 3},
		{format.ExpediaAR, "availability", nil, "[DBL##2027-01-01#2027-01-02#0 DBL#BAR#2027-01-02#2027-01-02#0 TWN#NRF#2027-01-03#2027-01-03#0]", 3, 4, "[{TWN   }]", 1 + 3},
		{format.OpenTravel, "rates", nil, "[DBL#BAR#2027-01-01#2027-01-01#0 TWN#NRF#2027-01-01#2027-01-01#0]", 2, 2, "[{DBL NRF  } {TWN BAR  }]", 2 + 2 + 3 + 3},
		{format.JSON, "availability", nil, "[DBL#BAR#2027-01-02#2027-01-02#0 DBL##2027-01-01#2027-01-02#0 TWN#NRF#2027-01-03#2027-01-03#0]", 3, 4, "[{DBL NRF  } {TWN BAR  }]", 2 + 2 + 3 + 3},
		// A mapping fix names the remapped room's pairs (Trigger): its
		// availability is the room type's.
		{format.ExpediaAR, "availability", []ari.ResyncCell{{RoomType: "TWN", RatePlan: "BAR"}, {RoomType: "TWN", RatePlan: "NRF"}},
			"[TWN#NRF#2027-01-03#2027-01-03#0]", 1, 1, "[{TWN   }]", 3},
		{format.ExpediaAR, "rates", []ari.ResyncCell{{RoomType: "TWN", RatePlan: "BAR"}, {RoomType: "TWN", RatePlan: "NRF"}},
			"[TWN#NRF#2027-01-01#2027-01-01#0]", 1, 1, "[{TWN BAR  }]", 3 + 2},
	}
	for _, tt := range tests {
		r := r
		r.Cells = tt.named
		cells, err := Cells(r, config.Target{Channel: "ota", Format: tt.format, Codes: codes}, tt.kind)
		if err != nil {
			t.Fatal(err)
		}
		p, err := PlanKind(context.Background(), st, r, tt.kind, cells)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(p.Elements); got != tt.elements {
			t.Errorf("%s %s: elements %s, want %s", tt.format, tt.kind, got, tt.elements)
		}
		if got := fmt.Sprint(p.Missing); p.Cells != tt.cells || p.Dates != tt.dates || got != tt.missing || p.MissingDates != tt.missingDates {
			t.Errorf("%s %s: %d cells, %d dates, missing %s (%d dates); want %d, %d, %s (%d)",
				tt.format, tt.kind, p.Cells, p.Dates, got, p.MissingDates, tt.cells, tt.dates, tt.missing, tt.missingDates)
		}
	}
}

func TestTriggerResyncsWhatAConnectionWriteMakesNew(t *testing.T) {
	base := config.Property{Channel: "ota", Credential: "c", HotelRef: "H", RoomTypes: map[string]string{"DBL": "1", "SUI": "2"}, RatePlans: map[string]string{"BAR": "9", "NRF": "8"}}
	with := func(f func(p *config.Property)) config.Property {
		p := base
		p.RoomTypes, p.RatePlans = maps.Clone(base.RoomTypes), maps.Clone(base.RatePlans)
		f(&p)
		return p
	}
	disabled := with(func(p *config.Property) { p.Disabled = true })
	tests := []struct {
		name      string
		was       *config.Property
		now       config.Property
		cells     string
		all, some bool
	}{
		{"a new connection, whole", nil, base, "[]", true, true},
		{"enabled again, whole", &disabled, base, "[]", true, true},
		{"disabled: nothing", &base, disabled, "[]", false, false},
		{"another hotel ref, whole", &base, with(func(p *config.Property) { p.HotelRef = "H2" }), "[]", true, true},
		{"nothing changed", &base, base, "[]", false, false},
		{"a room remapped: its cells", &base, with(func(p *config.Property) { p.RoomTypes["DBL"] = "7" }), "[{DBL BAR  } {DBL NRF  }]", false, true},
		{"a rate plan added: its cells", &base, with(func(p *config.Property) { p.RatePlans["FLX"] = "5" }), "[{DBL FLX  } {SUI FLX  }]", false, true},
		{"a room removed: nothing to push", &base, with(func(p *config.Property) { delete(p.RoomTypes, "SUI") }), "[]", false, false},
	}
	for _, tt := range tests {
		cells, all, some := Trigger(tt.was, tt.now)
		if got := fmt.Sprint(cells); got != tt.cells && !(tt.cells == "[]" && cells == nil) || all != tt.all || some != tt.some {
			t.Errorf("%s: Trigger = %v, all %v, any %v; want %s, %v, %v", tt.name, cells, all, some, tt.cells, tt.all, tt.some)
		}
	}
}

func TestByMonthCutsElementsAtCalendarMonths(t *testing.T) {
	tests := []struct {
		from, to string
		want     string
	}{
		{"2027-01-05", "2027-01-20", "[D#B#2027-01-05#2027-01-20#0]"},
		{"2027-01-30", "2027-02-02", "[D#B#2027-01-30#2027-01-31#0 D#B#2027-02-01#2027-02-02#0]"},
		{"2028-02-28", "2028-03-01", "[D#B#2028-02-28#2028-02-29#0 D#B#2028-03-01#2028-03-01#0]"},
		{"2027-12-31", "2028-01-01", "[D#B#2027-12-31#2027-12-31#0 D#B#2028-01-01#2028-01-01#0]"},
		{"2027-03-01", "2027-06-30", "[D#B#2027-03-01#2027-03-31#0 D#B#2027-04-01#2027-04-30#0 D#B#2027-05-01#2027-05-31#0 D#B#2027-06-01#2027-06-30#0]"},
		{"bad", "2027-01-01", "[D#B#bad#2027-01-01#0]"},
	}
	for _, tt := range tests {
		got := fmt.Sprint(ByMonth([]lane.Element{{RoomType: "D", RatePlan: "B", From: tt.from, To: tt.to}}))
		if got != tt.want {
			t.Errorf("ByMonth(%s..%s) = %s, want %s", tt.from, tt.to, got, tt.want)
		}
	}
}
