package format

import "sort"

// Plan is what to do with the changes a message carried once the vendor
// answered, by their index in that message (0..n-1).
type Plan struct {
	// DeadLetter are changes to dead-letter now, with the vendor's reason:
	// refused alone, or named by the vendor.
	DeadLetter []int
	// Push are groups of changes to push again, each group as its own
	// request paying its own tokens.
	Push [][]int
	// Again: push the whole message again later, unchanged and unsplit
	// (Throttled, Transient): a split would only multiply the requests a
	// vendor that is failing or throttling has to refuse.
	Again bool
}

// PlanFor decides what follows an outcome for a message of n merged
// changes, named being the indices of the changes the vendor named as
// refused (see Outcome.Names). Applied messages need nothing; throttled and
// transient ones go again whole; refused ones are isolated (Isolate).
func PlanFor(v Verdict, n int, named []int) Plan {
	switch v {
	case Refused:
		return Isolate(n, named)
	case Throttled, Transient:
		return Plan{Again: true}
	}
	return Plan{}
}

// Isolate splits a refused message of n changes until the refused ones are
// alone, so that every other change still reaches the vendor:
//
//   - one change: it is the refused one; dead-letter it.
//   - the vendor named some: dead-letter those, push the rest in one
//     request (which, if refused again, is isolated in turn).
//   - otherwise: push each half on its own.
//
// The bound, for one refused change among n and a vendor that names
// nothing: each level of halving pushes two requests and the refused
// change sits in one half, so finding it takes at most 2·⌈log₂ n⌉ extra
// requests (n = 11: 8), and each further refused change adds at most as
// many. A vendor that names the change costs one extra request (the
// rest), none if nothing is left.
func Isolate(n int, named []int) Plan {
	if n <= 0 {
		return Plan{}
	}
	if n == 1 {
		return Plan{DeadLetter: []int{0}}
	}
	bad := map[int]bool{}
	for _, i := range named {
		if i >= 0 && i < n {
			bad[i] = true
		}
	}
	if len(bad) > 0 {
		p := Plan{}
		var rest []int
		for i := range n {
			if bad[i] {
				p.DeadLetter = append(p.DeadLetter, i)
			} else {
				rest = append(rest, i)
			}
		}
		sort.Ints(p.DeadLetter)
		if len(rest) > 0 {
			p.Push = [][]int{rest}
		}
		return p
	}
	half := (n + 1) / 2
	return Plan{Push: [][]int{seq(0, half), seq(half, n)}}
}

func seq(from, to int) []int {
	s := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}
