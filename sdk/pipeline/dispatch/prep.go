package dispatch

import (
	"sync"
	"time"
)

// What comes between a slot and its send is lateness, and a push later
// than its grace leaves its slot unused (spendable). Two store calls came
// between them that the dispatcher can move: the work's Begin (the lane's
// claim and render, a write and reads), begun after the slot, and, for a
// slot due at once, the grant's own write, whose slot is the now it
// claimed. On a store as slow as the emulator under a burst (p50 278 ms,
// p99 480 ms a call, a grant often two writes) either alone passed the
// demo's 500 ms margin, and most pushes wasted their slots. So a job's
// work is begun before its slot (decide's actPrepare, PrepLead ahead), and
// a slot is booked with its write claiming a now as far ahead as grants
// take to be answered (AheadReserver), so that the answer comes before
// the slot.

// slowest learns how long a store call of one kind takes, as a slowly
// decaying maximum (as lateness does): reaching a slot too early costs
// only a short wait, or a change that lands meanwhile goes with the lane's
// next push; too late, a whole slot.
type slowest struct {
	mu   sync.Mutex
	max  time.Duration
	seen bool // a call was observed
}

// slowestDecay is how much of the maximum survives each observation: it
// halves in about 35 calls.
const slowestDecay = 0.98

// slowestMargin is kept over the longest call seen.
const slowestMargin = 1.25

func (s *slowest) observe(took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max, s.seen = max(time.Duration(float64(s.max)*slowestDecay), took), true
}

// lead is how long ahead to start a call so that it ends in time: the
// longest seen, with slowestMargin, at most ceiling; unseen until a call
// is seen (a process's first calls: the bucket's margin, which an
// operator sets to the store latency the fleet sees, docs/design.md).
func (s *slowest) lead(ceiling, unseen time.Duration) time.Duration {
	s.mu.Lock()
	m, seen := s.max, s.seen
	s.mu.Unlock()
	if !seen {
		return max(min(unseen, ceiling), 0)
	}
	return max(min(time.Duration(float64(m)*slowestMargin), ceiling), 0)
}
