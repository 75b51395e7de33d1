package lane

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestCoalesce(t *testing.T) {
	e := func(room, from, to string, seq int64) Element {
		return Element{RoomType: room, RatePlan: "BAR", From: from, To: to, Sequence: seq}
	}
	// 2026-01-01 is day 20454 = 31·659 + 25 of the epoch: with blocks of 31,
	// a block starts on 2026-01-07 (day 20460).
	tests := []struct {
		name string
		in   []Element
		want []Element
	}{
		{"one element stays", []Element{e("DBL", "2026-01-10", "2026-01-12", 1)}, []Element{e("DBL", "2026-01-10", "2026-01-12", 1)}},
		{"same cell and block merge, newest sequence", []Element{e("DBL", "2026-01-10", "2026-01-12", 1), e("DBL", "2026-01-20", "2026-01-20", 2)},
			[]Element{e("DBL", "2026-01-10", "2026-01-20", 2)}},
		{"cells stay apart", []Element{e("DBL", "2026-01-10", "2026-01-10", 1), e("TWN", "2026-01-10", "2026-01-10", 2)},
			[]Element{e("DBL", "2026-01-10", "2026-01-10", 1), e("TWN", "2026-01-10", "2026-01-10", 2)}},
		{"split at a block edge", []Element{e("DBL", "2026-01-05", "2026-01-08", 3)},
			[]Element{e("DBL", "2026-01-05", "2026-01-06", 3), e("DBL", "2026-01-07", "2026-01-08", 3)}},
		{"repeats collapse", []Element{e("DBL", "2026-01-10", "2026-01-10", 1), e("DBL", "2026-01-10", "2026-01-10", 1)},
			[]Element{e("DBL", "2026-01-10", "2026-01-10", 1)}},
		{"a resync's block stays apart from a change's", []Element{e("DBL", "2026-01-10", "2026-01-20", BulkSequence), e("DBL", "2026-01-12", "2026-01-12", 4)},
			[]Element{e("DBL", "2026-01-10", "2026-01-20", BulkSequence), e("DBL", "2026-01-12", "2026-01-12", 4)}},
		{"unparsable dates are kept", []Element{e("DBL", "x", "2026-01-10", 1)}, []Element{e("DBL", "x", "2026-01-10", 1)}},
	}
	for _, tt := range tests {
		got := Coalesce(tt.in, 31)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: Coalesce = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Whatever the backlog, the merged elements cover every date of every
// element with a sequence at least as new, span at most a block each, and
// number at most cells × blocks touched.
func TestCoalesceCoversEveryDateAndStaysBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const block = 7
	rooms := []string{"DBL", "TWN", "SGL"}
	start := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	var in []Element
	for seq := range int64(5000) {
		from := start.AddDate(0, 0, rng.IntN(90))
		in = append(in, Element{RoomType: rooms[rng.IntN(3)], RatePlan: "BAR", From: from.Format("2006-01-02"),
			To: from.AddDate(0, 0, rng.IntN(10)).Format("2006-01-02"), Sequence: seq + 1})
	}
	out := Coalesce(in, block)
	if bound := len(rooms) * (100/block + 2); len(out) > bound {
		t.Fatalf("%d elements merged into %d, want at most %d (cells × blocks)", len(in), len(out), bound)
	}
	newest := map[string]int64{} // room#date → the newest input sequence
	for _, e := range in {
		for d := parse(t, e.From); !d.After(parse(t, e.To)); d = d.AddDate(0, 0, 1) {
			k := e.RoomType + "#" + d.Format("2006-01-02")
			newest[k] = max(newest[k], e.Sequence)
		}
	}
	covered := map[string]int64{}
	for _, e := range out {
		from, to := parse(t, e.From), parse(t, e.To)
		if span := int(to.Sub(from).Hours()/24) + 1; span > block {
			t.Errorf("%v spans %d days, want at most %d", e, span, block)
		}
		for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
			k := e.RoomType + "#" + d.Format("2006-01-02")
			covered[k] = max(covered[k], e.Sequence)
		}
	}
	for k, seq := range newest {
		if covered[k] < seq {
			t.Errorf("%s: covered at sequence %d, want at least %d", k, covered[k], seq)
		}
	}
}

func parse(t *testing.T, s string) time.Time {
	t.Helper()
	d, err := time.Parse("2006-01-02", s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
