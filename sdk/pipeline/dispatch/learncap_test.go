package dispatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// learnCap has lim learn a cap of n requests in flight for bucket key
// (0: none), as a throttle met with 2n of them at the vendor teaches.
func learnCap(t *testing.T, lim *limitertest.Limiter, key string, n int) {
	t.Helper()
	if n == 0 {
		return
	}
	if err := lim.LowerInFlight(t.Context(), key, 2*n, lim.Now()); err != nil {
		t.Fatal(err)
	}
	if got := lim.InFlightCap(key); got != n {
		t.Fatalf("learned a cap of %d, want %d", got, n)
	}
}

// lowerings is the requests in flight each lowering of calls told of.
func lowerings(calls []limitertest.Call) []int {
	var n []int
	for _, c := range calls {
		if c.Op == "LowerInFlight" {
			n = append(n, c.N)
		}
	}
	return n
}

// crowdedPusher throttles every push; with others, another request of
// the bucket is at the vendor from this process while it is answered.
// leased records whether each push ran under an in-flight lease.
type crowdedPusher struct {
	others bool
	leased []bool
}

func (p *crowdedPusher) Push(_ context.Context, req otapush.Request) (otapush.Response, error) {
	p.leased = append(p.leased, req.Lease != nil)
	if req.AtVendor != nil {
		if p.others {
			other := req.AtVendor()
			defer other(false)
		}
		req.AtVendor()(true)
	}
	return otapush.Response{Attempts: 1, Throttled: 1}, &otapush.DeferError{Throttled: true, Cause: errors.New("vendor answered 429 (throttled)")}
}

// learnRoute routes to one bucket metered by items, naming no
// max_in_flight: the lease a learned cap asks is Learn's.
var learnRoute = fixedRoute{Bucket: limiter.Bucket{Key: "c", Limit: limiter.PerSecond(4, 16)}, URL: "http://ota.invalid", ItemWeight: 1,
	Learn: &limiter.InFlight{Key: "c", Max: limiter.MaxLeases, Hold: 25 * time.Second, Timeout: 21 * time.Second}}

// A throttle met while other requests of the bucket were at the vendor
// (this process's, or, under a learned cap of two or more, maybe the
// fleet's) is the vendor's concurrency: it lowers the learned cap and
// leaves the lane's requests their size (job.Fit). Alone at the vendor,
// the throttle is its pace, and halves Fit as before. While a cap is
// learned, the route, which names no max_in_flight, pushes under a lease.
func TestAConcurrencyThrottleLowersTheCapAndLeavesFitAlone(t *testing.T) {
	tests := []struct {
		name        string
		cap         int  // learned before the push; 0: none
		others      bool // another request of the bucket at the vendor
		wantLowered []int
		wantCap     int // learned after the push
		wantFit     int
		wantLeased  bool
	}{
		{"alone, nothing learned: its pace, Fit halved", 0, false, nil, 0, 4, false},
		{"another at the vendor: cap lowered from 2 requests, Fit kept", 0, true, []int{2}, 1, 0, false},
		{"alone under a learned cap of 3: the fleet's may be there", 3, false, []int{1}, 2, 0, true},
		{"alone under a learned cap of 1: its pace, Fit halved", 1, false, nil, 1, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newLeaseRig(t)
				learnCap(t, r.lim, "c", tt.cap)
				before := len(r.lim.Calls())
				p := &crowdedPusher{others: tt.others}
				r.d.Pusher, r.d.Routes = p, learnRoute
				r.d.Can.Caps = r.lim
				r.d.Work = &sizedWork{work: work{clock: r.clock}, items: 8}
				res, err := r.d.HandleJob(context.Background(), itemsJob(r.clock.Now(), "c", 8))
				if err != nil {
					t.Fatal(err)
				}
				if res.Outcome != Deferred || len(r.queue.deferred) != 1 {
					t.Fatalf("%+v, %d deferred; want the throttled job deferred", res, len(r.queue.deferred))
				}
				if got := r.queue.deferred[0].j.Fit; got != tt.wantFit {
					t.Errorf("Fit %d after the throttle, want %d", got, tt.wantFit)
				}
				if lowered := lowerings(r.lim.Calls()[before:]); fmt.Sprint(lowered) != fmt.Sprint(tt.wantLowered) {
					t.Errorf("cap lowered from %v requests at the vendor, want %v", lowered, tt.wantLowered)
				}
				if got := r.lim.InFlightCap("c"); got != tt.wantCap {
					t.Errorf("a cap of %d learned after the push, want %d", got, tt.wantCap)
				}
				if len(p.leased) != 1 || p.leased[0] != tt.wantLeased {
					t.Errorf("pushes under a lease %v, want [%v]", p.leased, tt.wantLeased)
				}
			})
		})
	}
}

// The lease a push takes: the route's own max_in_flight, lowered to a
// learned cap; Learn's at the learned cap where the route names none; and
// none while nothing is learned, or the dispatcher cannot lease or learn.
func TestTheLearnedCapBoundsTheLease(t *testing.T) {
	learn := &limiter.InFlight{Key: "c", Max: limiter.MaxLeases, Hold: 25 * time.Second, Timeout: 21 * time.Second}
	own := &limiter.InFlight{Key: "c", Max: 5, Hold: 25 * time.Second, Timeout: 21 * time.Second}
	tests := []struct {
		name       string
		configured *limiter.InFlight
		learn      *limiter.InFlight
		cap        int
		noLeases   bool
		want       int // the lease's Max; 0: no lease
	}{
		{"nothing learned, none configured: no lease", nil, learn, 0, false, 0},
		{"a cap of 2 learned, none configured: Learn's at 2", nil, learn, 2, false, 2},
		{"a cap of 3 below the configured 5", own, own, 3, false, 3},
		{"a cap of 8 above the configured 5: 5", own, own, 8, false, 5},
		{"nothing learned: the configured 5", own, own, 0, false, 5},
		{"no Leases: nothing learned applies", nil, learn, 2, true, 0},
		{"no Learn (a route built without it): as configured", nil, nil, 2, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := limitertest.New()
			learnCap(t, lim, "c", tt.cap)
			d := &Dispatcher{Can: Capabilities{Caps: lim}}
			if !tt.noLeases {
				d.Leases = NewLeases(nil)
			}
			tk := &task{Route: Route{Bucket: limiter.Bucket{Key: "c"}, InFlight: tt.configured, Learn: tt.learn}, configured: tt.configured}
			got := 0
			if f := d.inFlight(tk); f != nil {
				got = f.Max
			}
			if got != tt.want {
				t.Fatalf("lease Max %d, want %d", got, tt.want)
			}
		})
	}
}

// A lease taken before the token (the set contended: job.LeaseBusy) under
// a Max above the cap the token's answer told of goes back, and the push
// takes one under the cap: the set bounds its leases by the largest Max
// an acquirer passes, so a lease of the old Max would let the fleet
// exceed the learned cap.
func TestALeaseTakenAboveTheLearnedCapIsTakenAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &limiter.InFlight{Key: "k", Max: 3, Hold: 25 * time.Second}
		r := newLeaseRig(t)
		// Another worker meets the vendor's cap of one while this one
		// books: the booking's answer tells of the cap it learned.
		fleet := limitertest.New(limitertest.WithClock(r.clock.Now))
		r.d.Limiter = limitertest.New(limitertest.WithClock(r.clock.Now), limitertest.WithFault(func(op, _ string) error {
			if op == "Reserve" {
				r.ev.add("reserve")
				return fleet.LowerInFlight(context.Background(), "k", 2, r.clock.Now())
			}
			return nil
		}))
		r.d.Pusher, r.d.Work = &leasePusher{events: r.ev}, nil
		r.d.Can.Caps = fleet
		r.d.Routes = learnLeaseRoute(f)
		j := testJob(r.clock.Now())
		j.LeaseBusy = true
		res, err := r.d.HandleJob(context.Background(), j)
		if err != nil || res.Outcome != Pushed {
			t.Fatalf("%+v, %v; want pushed", res, err)
		}
		if got, want := r.ev.String(), "acquire,reserve,release,acquire,push,release"; got != want {
			t.Fatalf("events %s; want %s", got, want)
		}
	})
}

// learnLeaseRoute routes with max_in_flight f, and learns under it.
func learnLeaseRoute(f *limiter.InFlight) fixedRoute {
	return fixedRoute{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(4, 8)}, URL: "http://ota.invalid", InFlight: f, Learn: f}
}
