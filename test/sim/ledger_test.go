package sim

import (
	"testing"
	"time"
)

// The ledger counts an accepted day whose sequence is older than the one
// the OTA held: an older state overwrote a newer one. A repeat of the same
// sequence (a retried push) and a newer one are not.
func TestLedgerCountsAnOlderStateOverANewerOne(t *testing.T) {
	k := rowKey{prop: 7, kind: 1}
	tests := []struct {
		name     string
		accepted []int32 // sequences the OTA accepts for one day, in order
		want     int
	}{
		{"newer after older", []int32{1, 2, 3}, 0},
		{"the same again", []int32{2, 2}, 0},
		{"older after newer", []int32{3, 1}, 1},
		{"twice back", []int32{5, 4, 3}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLedger(time.Now(), []string{"booking"}, [][3]bool{{true, true, true}})
			for _, seq := range tt.accepted {
				l.Publish(k, 40, 1, seq, seq*10)
			}
			for _, seq := range tt.accepted {
				l.Accept(0, k, 40, seq, seq*10)
			}
			if l.WentBack != tt.want {
				t.Fatalf("went back %d times, want %d", l.WentBack, tt.want)
			}
			if (tt.want > 0) != (l.WentBackExample != "") {
				t.Fatalf("example %q for %d", l.WentBackExample, l.WentBack)
			}
		})
	}
}

// An XML vendor receives values alone, and a value the PMS published
// twice for a day may be either change: the day went back only when no
// sequence each value can be makes its history at the OTA non-decreasing.
func TestLedgerReadsARepeatedValueAsAnyOfItsChanges(t *testing.T) {
	k := rowKey{prop: 7, kind: 2}
	tests := []struct {
		name      string
		published [][2]int32 // (sequence, value), in order
		accepted  []int32    // values the OTA accepts for the day, in order
		want      int
	}{
		// Seed 1149: 73's 9, then 142's 302, then 158's 9, in the order
		// the store applied them.
		{"an older change's value that a newer one repeats", [][2]int32{{73, 9}, {142, 302}, {158, 9}}, []int32{9, 302, 9}, 0},
		{"newer after older", [][2]int32{{1, 10}, {2, 20}, {3, 30}}, []int32{10, 20, 30}, 0},
		{"older after newer", [][2]int32{{1, 10}, {2, 20}, {3, 30}}, []int32{30, 20}, 1},
		{"a repeat that only an older change can be", [][2]int32{{1, 10}, {2, 20}, {3, 30}, {4, 20}}, []int32{30, 10}, 1},
		{"a repeat that a newer change can be", [][2]int32{{1, 10}, {2, 20}, {3, 30}, {4, 20}}, []int32{30, 20}, 0},
		{"each read as its least keeps the next open", [][2]int32{{1, 10}, {2, 20}, {3, 10}, {4, 20}}, []int32{10, 20, 10, 20}, 0},
		{"a value no change published", [][2]int32{{1, 10}}, []int32{10, 99}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLedger(time.Now(), []string{"booking"}, [][3]bool{{true, true, true}})
			l.wire = wireLedger{}
			for _, p := range tt.published {
				l.Publish(k, 40, 1, p[0], p[1])
			}
			for _, v := range tt.accepted {
				l.AcceptWire(0, k, 40, v)
			}
			if l.WentBack != tt.want {
				t.Fatalf("went back %d times, want %d (first: %s)", l.WentBack, tt.want, l.WentBackExample)
			}
		})
	}
}
