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
