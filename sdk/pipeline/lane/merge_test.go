package lane

import (
	"fmt"
	"testing"
)

// Merge unites the dates of a cell's elements and adds none: a gap between
// two changes of one block stays a gap (Coalesce would span it), so a push
// metered by items pays for no date nobody changed.
func TestMerge(t *testing.T) {
	e := func(room, from, to string, seq int64) Element {
		return Element{RoomType: room, RatePlan: "BAR", From: from, To: to, Sequence: seq}
	}
	// Blocks of 31 start on 2026-01-07 (see TestCoalesce).
	tests := []struct {
		name       string
		in         []Element
		want       []Element
		overlapped bool
	}{
		{"overlapping changes become one, newest sequence", []Element{e("DBL", "2026-01-10", "2026-01-14", 1), e("DBL", "2026-01-12", "2026-01-16", 2)},
			[]Element{e("DBL", "2026-01-10", "2026-01-16", 2)}, true},
		{"a gap stays a gap", []Element{e("DBL", "2026-01-10", "2026-01-11", 1), e("DBL", "2026-01-20", "2026-01-20", 2)},
			[]Element{e("DBL", "2026-01-10", "2026-01-11", 1), e("DBL", "2026-01-20", "2026-01-20", 2)}, false},
		{"each run keeps the newest sequence of its own dates", []Element{e("DBL", "2026-01-10", "2026-01-12", 5), e("DBL", "2026-01-12", "2026-01-12", 1), e("DBL", "2026-01-20", "2026-01-21", 3)},
			[]Element{e("DBL", "2026-01-20", "2026-01-21", 3), e("DBL", "2026-01-10", "2026-01-12", 5)}, true},
		{"cells stay apart", []Element{e("DBL", "2026-01-10", "2026-01-10", 1), e("TWN", "2026-01-10", "2026-01-10", 2)},
			[]Element{e("DBL", "2026-01-10", "2026-01-10", 1), e("TWN", "2026-01-10", "2026-01-10", 2)}, false},
		{"a run splits at a block edge", []Element{e("DBL", "2026-01-01", "2026-01-06", 1), e("DBL", "2026-01-05", "2026-01-08", 2)},
			[]Element{e("DBL", "2026-01-01", "2026-01-06", 2), e("DBL", "2026-01-07", "2026-01-08", 2)}, true},
		{"a resync's dates stay apart from a change's", []Element{e("DBL", "2026-01-10", "2026-01-20", BulkSequence), e("DBL", "2026-01-12", "2026-01-12", 4)},
			[]Element{e("DBL", "2026-01-10", "2026-01-20", BulkSequence), e("DBL", "2026-01-12", "2026-01-12", 4)}, false},
		{"unparsable dates are kept", []Element{e("DBL", "x", "2026-01-10", 1)}, []Element{e("DBL", "x", "2026-01-10", 1)}, false},
	}
	for _, tt := range tests {
		got, overlapped := Merge(tt.in, 31)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) || overlapped != tt.overlapped {
			t.Errorf("%s: Merge = %v, %v; want %v, %v", tt.name, got, overlapped, tt.want, tt.overlapped)
		}
	}
}
