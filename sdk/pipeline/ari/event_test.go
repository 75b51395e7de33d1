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
		{"sequence 1 then 2", envelope(strings.Replace(ok, `"sequence":7`, `"sequence":1,"sequence":2`, 1)), `detail.sequence: key "sequence" appears twice`},
		{"duplicate inside values", envelope(strings.Replace(ok, `{"amount":"129.00"}`, `{"amount":"129.00","amount":"1.00"}`, 1)), `detail.values.amount: key "amount" appears twice`},
		{"duplicate detail", strings.TrimSuffix(envelope(ok), "}") + `,"detail":` + ok + `}`, `detail: key "detail" appears twice`},
		{"trailing data", envelope(ok) + `{"source":"pms"}`, "not JSON: invalid character"},
		{"sequence 2^63-1", envelope(strings.Replace(ok, `"sequence":7`, `"sequence":9223372036854775807`, 1)), "sequence is 9223372036854775807, want 1..9007199254740992"},
		{"sequence 2^53+1", envelope(strings.Replace(ok, `"sequence":7`, `"sequence":9007199254740993`, 1)), "want 1..9007199254740992"},
		{"sequence beyond int64", envelope(strings.Replace(ok, `"sequence":7`, `"sequence":18446744073709551616`, 1)), "detail: json: cannot unmarshal number"},
		{"values of 1 MiB", envelope(strings.Replace(ok, `"129.00"`, `"`+strings.Repeat("9", 1<<20)+`"`, 1)), "values are 1048589 bytes of JSON, more than the 8192 allowed"},
		{"values just over the cap", envelope(strings.Replace(ok, `"129.00"`, `"`+strings.Repeat("9", MaxValuesBytes-12)+`"`, 1)), "values are 8193 bytes"},
		{"room type too long", envelope(strings.Replace(ok, `"DBL"`, `"`+strings.Repeat("D", MaxIDBytes+1)+`"`, 1)), "at most 256 bytes each"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.body, 31)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %.300v, want ErrInvalid mentioning %q", err, tt.want)
			}
			if len(err.Error()) > 1024 {
				t.Fatalf("the reason is %d bytes long; it travels in a message attribute", len(err.Error()))
			}
		})
	}
}

// The bounds themselves are accepted: they are limits, not off-by-ones.
func TestParseAtTheBounds(t *testing.T) {
	tests := []struct{ name, detail string }{
		{"sequence 2^53", `{"event_id":"e","property_id":"p","sequence":9007199254740992,"kind":"rates","room_type":"D","from":"2026-12-01","to":"2026-12-01","values":{"a":1}}`},
		{"values of exactly 8 KiB", `{"event_id":"e","property_id":"p","sequence":1,"kind":"rates","room_type":"D","from":"2026-12-01","to":"2026-12-01","values":{"a":"` +
			strings.Repeat("x", MaxValuesBytes-8) + `"}}`},
		{"ids of 256 bytes", `{"event_id":"` + strings.Repeat("e", MaxIDBytes) + `","property_id":"p","sequence":1,"kind":"rates","room_type":"D","from":"2026-12-01","to":"2026-12-01","values":{"a":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse(envelope(tt.detail), 31); err != nil {
				t.Fatalf("Parse = %.300v, want it accepted", err)
			}
		})
	}
}

func TestChangeDates(t *testing.T) {
	tests := []struct{ from, to, want string }{
		{"2026-12-01", "2026-12-01", "2026-12-01"},
		{"2026-12-30", "2027-01-02", "2026-12-30,2026-12-31,2027-01-01,2027-01-02"},
		{"2028-02-27", "2028-03-01", "2028-02-27,2028-02-28,2028-02-29,2028-03-01"}, // a leap year
		{"2027-02-27", "2027-03-01", "2027-02-27,2027-02-28,2027-03-01"},
		{"2027-03-27", "2027-03-29", "2027-03-27,2027-03-28,2027-03-29"}, // Europe's clocks change; UTC dates do not
		{"2026-12-03", "2026-12-01", ""},
	}
	for _, tc := range tests {
		if got := strings.Join(Change{From: tc.from, To: tc.to}.Dates(), ","); got != tc.want {
			t.Errorf("%s..%s: Dates = %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
	if n := len(Change{From: "2027-01-01", To: "2027-12-31"}.Dates()); n != 365 {
		t.Errorf("a year of 2027: %d dates, want 365", n)
	}
}
