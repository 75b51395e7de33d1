package sim

import (
	"strings"
	"testing"
)

// TestLaneWentBack checks the lanes' oracle on sets written by hand: a
// replacement that names an older change for a date it keeps is reported,
// and merging to the newest, dropping a date, or keeping it newer is not.
func TestLaneWentBack(t *testing.T) {
	before := []string{"DBL#BAR#2027-01-01#2027-01-01#5", "DBL#BAR#2027-01-02#2027-01-02#9", "TWN#BAR#2027-01-01#2027-01-03#7"}
	for _, tt := range []struct {
		name  string
		after []string
		want  string // a substring of the report, "" for none
	}{
		{"merged with the newest sequence", []string{"DBL#BAR#2027-01-01#2027-01-02#9", "TWN#BAR#2027-01-01#2027-01-03#7"}, ""},
		{"merged with the oldest sequence", []string{"DBL#BAR#2027-01-01#2027-01-02#5", "TWN#BAR#2027-01-01#2027-01-03#7"}, "DBL/BAR 2027-01-02: sequence 9 before, 5 after"},
		{"a date dropped", []string{"DBL#BAR#2027-01-01#2027-01-01#5", "TWN#BAR#2027-01-01#2027-01-03#7"}, ""},
		{"another cell older", []string{"DBL#BAR#2027-01-01#2027-01-02#9", "TWN#BAR#2027-01-02#2027-01-02#6"}, "TWN/BAR 2027-01-02: sequence 7 before, 6 after"},
		{"emptied", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := laneWentBack(before, tt.after)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("laneWentBack = %q, want %q", got, tt.want)
			}
		})
	}
}
