package syncer

import (
	"sync"
	"time"
)

// ownership is what this process knows of the lanes it owns: the lease of
// each owner token it wrote, and whether that write listed the lane item
// for the sweep at the lease's end (a claim's or a renewal's does, a
// Mark's does not: lane.Store.Renew).
type ownership struct {
	mu     sync.Mutex
	leases map[string]held
}

type held struct {
	until  time.Time
	listed bool
}

// record records the lease (until) of an owner token this process wrote,
// and whether that write listed the lane item for the sweep at the
// lease's end (listed: a claim's or a renewal's; a Mark's does not).
func (o *ownership) record(token string, until time.Time, listed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.leases == nil || len(o.leases) > 10_000 {
		o.leases = map[string]held{} // tokens of long-gone jobs; renewing costs one write
	}
	o.leases[token] = held{until, listed}
}

func (o *ownership) lease(token string) (until time.Time, listed, known bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.leases[token]
	return h.until, h.listed, ok
}
