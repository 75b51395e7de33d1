package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// A learned in-flight cap (docs/design.md, "Learned in-flight caps").
//
// A vendor that takes only k requests of a credential at once, and names
// k nowhere (no max_in_flight, or a larger one), answers the excess 429.
// Each such 429 asks a silence, which revokes the fleet's booked slots;
// after it the fleet's environments send again at the bucket's rate, and
// most of them meet the cap again (adversary seed 209: one request in
// five or six accepted). Pacing cannot help: the cap counts requests at
// the vendor, not per second.
//
// So a throttle met while other requests of the bucket were at the vendor
// (this process's, counted as each attempt leaves and is answered:
// otapush.Request.AtVendor; or the fleet's, under a learned cap above
// one) lowers a cap the fleet shares (limiter.LowerInFlight: one write,
// after the 429, in the bucket's item). Every grant's answer carries the
// cap (limiter.InFlightCap), and while one holds each push takes a lease
// of the bucket's set with that Max (Route.Learn), as a route with
// max_in_flight does; it climbs back by one every quiet period, with no
// write. Nothing is written, and no lease taken, while nothing is learned.
//
// Such a throttle says nothing of the request's size: on an endpoint
// metered by items it leaves the lane's Fit alone (took.go).

// CapLearner learns a bucket's in-flight cap (*limiter.Limiter).
type CapLearner interface {
	InFlightCap(key string) int
	LowerInFlight(ctx context.Context, key string, inFlight int, sent time.Time) error
}

// inFlight is the lease t's push takes: the route's own, with its Max
// lowered to the cap the fleet learned for its bucket, or, where the
// route names none, Route.Learn's at that cap; nil for no lease.
func (d *Dispatcher) inFlight(t *task) *limiter.InFlight {
	if t.Learn == nil || d.Can.Caps == nil || d.Leases == nil {
		return t.configured
	}
	n := d.Can.Caps.InFlightCap(vendorKey(t.Route))
	if n <= 0 {
		return t.configured
	}
	f := *t.Learn
	if t.configured != nil {
		f = *t.configured
	}
	f.Max = min(f.Max, n)
	return &f
}

// sending counts, per bucket, the requests this process has at the vendor.
type sending struct {
	mu sync.Mutex
	n  map[string]int
}

// start counts a request of key until done, which reports how many other
// requests of key this process had at the vendor at its start or its
// end, whichever was more.
func (s *sending) start(key string) (done func() (others int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	before := s.n[key]
	s.n[key]++
	return func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.n[key]--
		after := s.n[key]
		if after <= 0 {
			delete(s.n, key)
		}
		return max(before, after)
	}
}

// concurrencyThrottle reports whether a throttle tells of the vendor's
// concurrency: other requests of the bucket were at the vendor from this
// process, or may have been from the fleet's, under a cap of two or more.
// With one request at the vendor, the throttle is its pace or its load.
func concurrencyThrottle(others, cap int) bool { return others > 0 || cap >= 2 }

// counted is req counting its attempts among its bucket's requests at the
// vendor; *concurrent is set when the vendor throttled one of them while
// others were there (concurrencyThrottle), and the cap that teaches is
// recorded.
func (d *Dispatcher) counted(ctx context.Context, t *task, req otapush.Request, concurrent *bool) otapush.Request {
	if t.Learn == nil || d.Can.Caps == nil || d.Leases == nil {
		return req
	}
	key := vendorKey(t.Route)
	req.AtVendor = func() func(bool) {
		sent := d.now()
		done := d.sending.start(key)
		return func(throttled bool) {
			others := done()
			if !throttled || !concurrencyThrottle(others, d.Can.Caps.InFlightCap(key)) {
				return
			}
			*concurrent = true
			if err := d.Can.Caps.LowerInFlight(context.WithoutCancel(ctx), key, others+1, sent); err != nil {
				d.log().Warn("could not record a learned in-flight cap; other workers learn it from their own throttles", "bucket", key, "err", err)
			}
		}
	}
	return req
}

// sendCounted sends req for t, counted (counted); concurrent reports a
// throttle of the vendor's concurrency.
func (d *Dispatcher) sendCounted(ctx context.Context, t *task, req otapush.Request) (resp otapush.Response, concurrent bool, err error) {
	resp, err = d.send(ctx, d.counted(ctx, t, req, &concurrent))
	return resp, concurrent, err
}
