package dispatch

import (
	"sync"
	"time"
)

// lateness learns how late the deferred queue delivers, so that deferrals
// come back early enough to use their slots: a missed slot costs a whole
// re-booking, coming back early only a sleep. Lateness has two parts. The
// queue's own grows with the delay asked for (moto: about 6%; SQS behind
// a scaling event source mapping: more), and only delays of at least
// minLearnDelay teach it, as a share. Busy workers add a time of their
// own whatever the delay (a message waits for a worker of the mapping's
// concurrency), which a share of a short delay never covers: a job
// deferred 1 s and delivered 2 s late missed a slot a 1 s lead kept. So
// the delays shorter than that teach it as a duration (behind). Both keep
// a slowly decaying maximum.
type lateness struct {
	mu     sync.Mutex
	ratio  float64       // decaying max of lateness ÷ delay, delays of minLearnDelay or more
	behind time.Duration // decaying max of lateness, shorter delays
}

// decay is how much of the maximum survives each observation: it halves in
// about 35 arrivals, so a burst of lateness is forgotten within minutes.
const decay = 0.98

// margin is kept over the largest lateness seen.
const margin = 1.25

// minLearnDelay is the shortest delay whose lateness is learned as a share
// of it.
const minLearnDelay = 5 * time.Second

func (l *lateness) observe(late, delayed time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ratio *= decay
	l.behind = time.Duration(decay * float64(l.behind))
	switch {
	case late <= 0:
	case delayed >= minLearnDelay:
		l.ratio = max(l.ratio, min(float64(late)/float64(delayed), 0.4))
	default:
		l.behind = max(l.behind, late)
	}
}

// rule is the lead a deferral comes back early by (leadRule): floor, or
// share of its wait, raised to the lateness seen; the busy workers' part no
// more than most, since a lead the call may not sleep would only send the job
// round the queue again.
func (l *lateness) rule(floor time.Duration, share float64, most time.Duration) leadRule {
	l.mu.Lock()
	defer l.mu.Unlock()
	return leadRule{Floor: floor, Ratio: max(share, margin*l.ratio), Behind: min(time.Duration(margin*float64(l.behind)), most)}
}
