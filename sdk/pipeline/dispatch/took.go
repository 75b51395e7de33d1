package dispatch

import (
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A throttle is no proof of size.
//
// On an endpoint metered by items, a request throttled to the end of its
// push halves its lane's requests (job.Fit): a vendor that lowered its
// limit below what the bucket takes at once refuses a request of that
// size on every try, whatever the pace, and only a smaller one can go.
// But a vendor throttles for its pace too, for its requests in flight, or
// for its own load, and a request of one item meets those as readily.
// Taken each time as a sign of size, the throttles of a vendor capping
// its requests in flight halved every lane's Fit push after push, down to
// a request a day or two: each lane then needed that many more requests,
// each of which met the cap again (adversary seed 209: 2.6 items a
// request, 862 days still stale after an hour of drain; without the
// halving, requests of 9 items drained in 12 minutes). So a throttle
// halves Fit only if the vendor has not taken as large a request of the
// same bucket, from any lane of this process, within tookFor: its limit
// held that size then, and the throttle was its pace. A vendor that
// lowers its limit stops taking the size, and within tookFor the lanes
// halve again.
//
// The learned in-flight cap (learncap.go) leaves Fit alone for a throttle
// met while other requests of the bucket were at the vendor; this rule
// covers the one met alone, which the cap takes for the vendor's pace:
// with it disabled, adversary seeds 209 and 380 still pass (the cap
// carries them), but a lone throttle of a size the vendor took seconds
// before halves Fit again (TestAThrottleOfASizeTheVendorTookLeavesFitAlone).

// tookFor is how long a request the vendor accepted vouches for its
// size: a vendor that lowers its limit costs the lanes of a bucket at
// most that long of throttles before they halve their requests.
const tookFor = time.Minute

// taken is the largest request, in items, that the vendor accepted of
// each bucket within tookFor (a process's own).
type taken struct {
	mu   sync.Mutex
	last map[string]took
}

type took struct {
	items int
	at    time.Time
}

// accepted records that the vendor took a request of items items of key
// at now.
func (k *taken) accepted(key string, items int, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.last == nil {
		k.last = map[string]took{}
	}
	if t, ok := k.last[key]; ok && t.items > items && now.Sub(t.at) < tookFor {
		return
	}
	k.last[key] = took{items: items, at: now}
}

// vouches reports whether the vendor took a request of at least items
// items of key within tookFor before now.
func (k *taken) vouches(key string, items int, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.last[key]
	return ok && t.items >= items && now.Sub(t.at) < tookFor
}

// vendorKey is the bucket of route the vendor counts: a sharded route's
// whole key, not its shard's.
func vendorKey(route Route) string {
	if route.Sharded != nil {
		return route.Sharded.Key
	}
	return route.Bucket.Key
}

// acceptedItems records a request of items items that the vendor accepted
// on route, on an endpoint metered by items.
func (d *Dispatcher) acceptedItems(route Route, items int) {
	if route.ItemWeight > 0 {
		d.took.accepted(vendorKey(route), items, d.now())
	}
}

// throttledItems is j after a request of items items failed with err on
// route: with a smaller Fit if the vendor throttled it on an endpoint
// metered by items and took no request as large within tookFor.
func (d *Dispatcher) throttledItems(route Route, j job.Job, items int, err error) job.Job {
	if !throttledByItems(route, err) || d.took.vouches(vendorKey(route), items, d.now()) {
		return j
	}
	j.Fit = fitAfterThrottle(j.Fit, items)
	return j
}
