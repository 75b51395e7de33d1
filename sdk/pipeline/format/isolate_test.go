package format_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

func TestIsolatePlan(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		named []int
		want  format.Plan
	}{
		{"one change is the refused one", 1, nil, format.Plan{DeadLetter: []int{0}}},
		{"halves", 11, nil, format.Plan{Push: [][]int{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}}}},
		{"the vendor named one", 11, []int{4}, format.Plan{DeadLetter: []int{4}, Push: [][]int{{0, 1, 2, 3, 5, 6, 7, 8, 9, 10}}}},
		{"the vendor named all", 2, []int{1, 0, 7}, format.Plan{DeadLetter: []int{0, 1}}},
		{"nothing", 0, nil, format.Plan{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := format.Isolate(tt.n, tt.named); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Isolate(%d, %v) = %+v, want %+v", tt.n, tt.named, got, tt.want)
			}
		})
	}
}

// Throttles and transient failures are never split; applied messages need
// nothing.
func TestPlanForNeverSplitsThrottlesOrFailures(t *testing.T) {
	for _, v := range []format.Verdict{format.Throttled, format.Transient} {
		if p := format.PlanFor(v, 11, []int{3}); !p.Again || p.Push != nil || p.DeadLetter != nil {
			t.Errorf("%v: %+v, want the whole message again", v, p)
		}
	}
	for _, v := range []format.Verdict{format.Accepted, format.AcceptedWithWarnings} {
		if p := format.PlanFor(v, 11, nil); !reflect.DeepEqual(p, format.Plan{}) {
			t.Errorf("%v: %+v, want nothing", v, p)
		}
	}
	if p := format.PlanFor(format.Refused, 11, nil); len(p.Push) != 2 {
		t.Errorf("refused: %+v, want halves", p)
	}
}

// isolate plays a vendor that refuses any message holding a bad change and
// names it when names is true, pushing what each plan says until every
// change is applied or dead-lettered; it returns the extra requests (all
// but the first) and what was dead-lettered.
func isolate(n int, bad map[int]bool, names bool) (extra int, dead []int, applied int) {
	queue := [][]int{seq(n)}
	requests := 0
	for len(queue) > 0 {
		msg := queue[0]
		queue = queue[1:]
		requests++
		var named []int
		for i, c := range msg {
			if bad[c] {
				named = append(named, i)
			}
		}
		if len(named) == 0 {
			applied += len(msg)
			continue
		}
		if !names {
			named = nil
		}
		p := format.PlanFor(format.Refused, len(msg), named)
		for _, i := range p.DeadLetter {
			dead = append(dead, msg[i])
		}
		for _, g := range p.Push {
			sub := make([]int, len(g))
			for j, i := range g {
				sub[j] = msg[i]
			}
			queue = append(queue, sub)
		}
	}
	return requests - 1, dead, applied
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// The bound: one refused change among n costs at most 2·⌈log₂ n⌉ extra
// requests when the vendor names nothing (Expedia AR), 1 when it names it
// (OpenTravel RecordID); k refused changes at most k times that. Every
// other change is applied, every refused one dead-lettered exactly once.
func TestIsolationBound(t *testing.T) {
	for n := 1; n <= 64; n++ {
		limit := 2 * int(math.Ceil(math.Log2(float64(n))))
		for b := range n {
			for _, names := range []bool{false, true} {
				extra, dead, applied := isolate(n, map[int]bool{b: true}, names)
				want := limit
				if names {
					want = min(1, n-1)
				}
				if extra > want || len(dead) != 1 || dead[0] != b || applied != n-1 {
					t.Fatalf("n=%d bad=%d names=%v: %d extra requests (bound %d), dead %v, applied %d", n, b, names, extra, want, dead, applied)
				}
			}
		}
	}
	// The worst case is reached: the bound is tight, not loose.
	if extra, _, _ := isolate(16, map[int]bool{0: true}, false); extra != 8 {
		t.Fatalf("n=16: %d extra requests, want 2·log₂16 = 8", extra)
	}
	if extra, _, _ := isolate(11, map[int]bool{10: true}, false); extra > 8 {
		t.Fatalf("n=11: %d extra requests, want ≤ 8", extra)
	}
	for n := 2; n <= 40; n++ {
		limit := 2 * int(math.Ceil(math.Log2(float64(n))))
		for a := range n {
			for b := a + 1; b < n; b++ {
				extra, dead, applied := isolate(n, map[int]bool{a: true, b: true}, false)
				if extra > 2*limit || len(dead) != 2 || applied != n-2 {
					t.Fatalf("n=%d bad=%d,%d: %d extra (bound %d), dead %v, applied %d", n, a, b, extra, 2*limit, dead, applied)
				}
			}
		}
	}
}
