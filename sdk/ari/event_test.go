package ari

import (
	"errors"
	"strings"
	"testing"
)

func envelope(detail string) string {
	return `{"version":"0","id":"e1","source":"pms","detail-type":"ARI change","time":"2026-11-30T12:00:00Z","detail":` + detail + `}`
}

func TestParse(t *testing.T) {
	ok := `{"event_id":"ev-1","property_id":"hotel-aurora","sequence":7,"kind":"rates","room_type":"DBL","rate_plan":"BAR","from":"2026-12-01","to":"2026-12-03","values":{"amount":"129.00"}}`
	c, err := Parse(envelope(ok), 31)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Dates(), ","); got != "2026-12-01,2026-12-02,2026-12-03" {
		t.Errorf("Dates = %s", got)
	}
	if c.Cell() != "hotel-aurora#rates#DBL#BAR" {
		t.Errorf("Cell = %s", c.Cell())
	}
	tests := []struct{ name, body, want string }{
		{"malformed JSON", `{"source":"pms",`, "not JSON"},
		{"not from the PMS", `{"source":"crm","detail":{}}`, "not a PMS event"},
		{"unknown field", envelope(`{"event_id":"e","colour":"red"}`), "unknown field"},
		{"unknown kind", envelope(strings.Replace(ok, `"rates"`, `"photos"`, 1)), `unknown kind "photos"`},
		{"inverted range", envelope(strings.Replace(ok, `"to":"2026-12-03"`, `"to":"2026-11-20"`, 1)), "inverted"},
		{"range too long", envelope(strings.Replace(ok, `"to":"2026-12-03"`, `"to":"2027-03-01"`, 1)), "91 days, more than the 31 allowed"},
		{"bad date", envelope(strings.Replace(ok, `"from":"2026-12-01"`, `"from":"tomorrow"`, 1)), `from "tomorrow" is not a date`},
		{"no sequence", envelope(strings.Replace(ok, `"sequence":7`, `"sequence":0`, 1)), "sequence is 0"},
		{"no property", envelope(strings.Replace(ok, `"hotel-aurora"`, `""`, 1)), "property_id"},
		{"no values", envelope(strings.Replace(ok, `{"amount":"129.00"}`, `{}`, 1)), "values are empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.body, 31)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
}
