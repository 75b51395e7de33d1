package dispatch

import (
	"sync"
	"time"
)

// lateness learns how late the deferred queue delivers, as a share of the
// delay asked for (moto: about 6%; SQS behind a scaling event source
// mapping: more), so that deferrals come back early enough to use their
// slots: a missed slot costs a whole re-booking, coming back early only a
// re-deferral. It keeps a slowly decaying maximum. Lateness on short
// delays says more about busy workers than about the queue, and coming
// back earlier would only keep workers busier, so only delays of at least
// minLearnDelay teach it.
type lateness struct {
	mu    sync.Mutex
	ratio float64 // decaying max of lateness ÷ delay
}

// decay is how much of the maximum survives each observation: it halves in
// about 35 arrivals, so a burst of lateness is forgotten within minutes.
const decay = 0.98

// margin is kept over the largest lateness seen.
const margin = 1.25

// minLearnDelay is the shortest delay whose lateness is learned from.
const minLearnDelay = 5 * time.Second

func (l *lateness) observe(late, delayed time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ratio *= decay
	if late > 0 && delayed >= minLearnDelay {
		l.ratio = max(l.ratio, min(float64(late)/float64(delayed), 0.4))
	}
}

// ratioOver is the share of its delay a deferral should come back early
// by: floor, or more if the lateness seen needs it.
func (l *lateness) ratioOver(floor float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(floor, margin*l.ratio)
}

// lead is how early a deferral of wait should come back: floor·wait, or
// more if the lateness seen needs it.
func (l *lateness) lead(wait time.Duration, floor float64) time.Duration {
	return time.Duration(l.ratioOver(floor) * float64(wait))
}
