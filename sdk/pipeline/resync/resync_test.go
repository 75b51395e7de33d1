package resync

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
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
	cells, err := Cells(r, config.Target{Channel: "ota", Codes: format.Codes{RoomTypes: map[string]string{"TWN": "2", "DBL": "1", "SUI": "3"}, RatePlans: map[string]string{"BAR": "B"}}})
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
	if _, err := Cells(r, config.Target{Channel: "ota"}); err == nil {
		t.Error("a connection that maps nothing gave cells; want an error asking for them")
	}
}
