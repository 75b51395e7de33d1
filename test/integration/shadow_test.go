package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// shadowRig is the lane pipeline with every endpoint in shadow mode, in
// front of a vendor that accepts everything and records it (an
// integration that already pushed at its own pace, with a vendor that
// tolerated it), so that what shadow mode lets through is seen whole.
func shadowRig(t *testing.T, lim limiter.Limit, hotels int) *laneRig {
	t.Helper()
	r := newLaneRig(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceNone}, hotelsConfig(lim, hotels, `, "mode": "shadow", "margin": "0s"`))
	r.linger = -1 // no deferral but enforcement's: a linger defers in every mode
	// The vendor's own window is the oracle of what enforcement would
	// schedule; a margin would schedule each push a little later than it.
	return r
}

// Twelve lanes change at once on an endpoint in shadow mode whose limit
// (burst 2, one request every 5 s) allows two of them now: all twelve are
// pushed at once, none deferred, and what shadow mode recorded (would
// defer, wait) is what enforcement would have done, as the vendor's own
// sliding-window check (package window, no sdk/gcra) schedules the same
// arrivals: the first two at once, each other one at the earliest time
// every window allows it.
func TestShadowPushesAtOnceAndRecordsWhatEnforcementWouldDo(t *testing.T) {
	const hotels = 12
	lim := limiter.PerSecond(0.2, 2)
	r := shadowRig(t, lim, hotels)
	srcs := make([]*pms, hotels)
	for h := range srcs {
		srcs[h] = newPMS(fmt.Sprintf("hotel-%d", h))
		r.enqueueBodies([]string{srcs[h].change("rates", "DBL", "2027-03-01", "2027-03-02", h)})
	}
	r.run(2, 2*time.Minute, 30*time.Second)

	held := otaCopy(t, r.pipeline)
	for h, src := range srcs {
		src.assertNewest(t, held, fmt.Sprintf("BK-%d", 1000+h))
	}
	var recorded []time.Duration
	wouldDefer := 0
	for _, res := range r.results {
		if res.Outcome == dispatch.Deferred || res.ShadowWouldShed {
			t.Errorf("shadow job %s: %s (would shed %v), want pushed", res.JobID, res.Outcome, res.ShadowWouldShed)
		}
		if res.Pushes == 0 {
			continue // a duplicate delivery; it booked no push of its own
		}
		recorded = append(recorded, res.ShadowWait)
		if res.ShadowWouldDefer {
			wouldDefer++
		}
	}
	arrivals := r.ota.AcceptedTimes("tok", "rates")
	if len(arrivals) != hotels || len(recorded) != hotels {
		t.Fatalf("the vendor accepted %d pushes and %d results pushed, want %d each (one per lane)", len(arrivals), len(recorded), hotels)
	}
	wl := window.Limit{Rate: lim.Rate, Burst: lim.Burst}
	if w, broken := window.Fullest(arrivals, wl); !broken {
		t.Errorf("the vendor's fullest window %v is within the limit: shadow mode held the pushes back", w)
	}

	// Enforcement's schedule of the same arrivals, by the vendor's check.
	oracle := enforcedWaits(arrivals, wl)
	waiting := 0
	for _, w := range oracle {
		if w > 0 {
			waiting++
		}
	}
	// A change batch hands its lanes to the deferred queue unless the slot
	// is now (syncer: change batches only wake lanes), so enforcement
	// would have deferred every push that had to wait.
	if wouldDefer != waiting || waiting != hotels-lim.Burst {
		t.Errorf("shadow recorded %d would-defer, the vendor's schedule has %d pushes waiting; want both %d (all but the burst)", wouldDefer, waiting, hotels-lim.Burst)
	}
	// Rank by rank the waits agree, to within what separates a slot's
	// booking from the push's arrival at the vendor (claiming the lane,
	// reading its state): far below the 5 s between slots.
	slices.Sort(recorded)
	tolerance := time.Duration(float64(time.Second) / lim.Rate / 2)
	for i := range oracle {
		if d := recorded[i] - oracle[i]; d > tolerance || d < -tolerance {
			t.Errorf("wait #%d: shadow recorded %v, enforcement would have made it %v (tolerance %v)", i+1, recorded[i], oracle[i], tolerance)
		}
	}
	if dlq := r.receiveDLQ(); len(dlq) != 0 {
		t.Errorf("dead-lettered %d messages: %v", len(dlq), dlq)
	}
	t.Logf("%d lanes pushed at once; shadow waits %v; enforcement's (vendor window) %v", hotels, recorded, oracle)
}

// enforcedWaits is how long enforcement would have held each arrival (in
// time order): served in order, each at the earliest time, not before the
// one before it, that every window admits (window.Log), as a reserving
// token bucket serves its slots.
func enforcedWaits(arrivals []time.Time, l window.Limit) []time.Duration {
	ts := slices.Clone(arrivals)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var log window.Log
	var last time.Time
	waits := make([]time.Duration, len(ts))
	for i, a := range ts {
		at := a
		if at.Before(last) {
			at = last
		}
		for d := log.Admit(at, l); !d.Allowed; d = log.Admit(at, l) {
			at = at.Add(d.Wait)
		}
		waits[i], last = at.Sub(a), at
	}
	return waits
}
