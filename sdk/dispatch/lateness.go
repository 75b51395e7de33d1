package dispatch

import (
	"sync"
	"time"
)

// lateness learns how late the deferred queue delivers, so that deferrals
// come back early enough to use their slots. It keeps a slowly decaying
// maximum of the lateness seen, both as a share of the delay asked for
// (moto: about 6%) and in absolute terms (an event source mapping that is
// scaling: seconds), since a missed slot costs a whole re-booking while
// coming back early only costs a re-deferral.
type lateness struct {
	mu    sync.Mutex
	ratio float64       // decaying max of lateness ÷ delay
	abs   time.Duration // decaying max of lateness
}

// decay is how much of the maximum survives each observation: it halves in
// about 35 arrivals, so a burst of lateness is forgotten within minutes.
const decay = 0.98

// margin is kept over the largest lateness seen.
const margin = 1.25

func (l *lateness) observe(late, delayed time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ratio *= decay
	l.abs = time.Duration(float64(l.abs) * decay)
	if late <= 0 {
		return
	}
	if delayed >= time.Second {
		l.ratio = max(l.ratio, float64(late)/float64(delayed))
	}
	l.abs = max(l.abs, late)
}

// lead is how early a deferral of wait should come back: the larger of
// floor·wait and what the lateness seen needs.
func (l *lateness) lead(wait time.Duration, floor float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	ratio := max(floor, margin*l.ratio)
	return max(time.Duration(ratio*float64(wait)), time.Duration(margin*float64(l.abs)))
}
