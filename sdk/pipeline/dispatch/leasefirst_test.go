package dispatch

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// leaseFirstRoute is leaseRoute(f), in shadow mode when shadow, booking
// at most horizon ahead when it is set.
func leaseFirstRoute(f *limiter.InFlight, shadow bool, horizon time.Duration) fixedRoute {
	r := leaseRoute(f)
	r.Shadow, r.Horizon = shadow, horizon
	return r
}

// A push whose lease set this process knows to be contended (its gate
// was told a moment ago that none is free, or more of its pushes go for a
// lease than its max) takes its lease first and books its token after it:
// the token is spent at once, whatever the lease wait, and none is booked
// that the push cannot spend. The route's grace is 875 ms (half the
// burst's refill of PerSecond(4, 8)). A lease that is free keeps the token
// first; a token the bucket can only give past its grace, or a horizon's
// denial slept for, hands the lease back while it waits; a shadow route,
// whose token never waits, takes its lease first too. The events are the bookings, the pushes and the lease
// store's calls: an acquire that finds the set full is one too, and a
// lease another push of the process hands over is a handover.
func TestContendedLeaseIsTakenBeforeTheToken(t *testing.T) {
	f := limiter.InFlight{Key: "k", Max: 1, Hold: time.Minute}
	tests := []struct {
		name string
		// heldFor: another push of this process holds the lease and
		// hands it over after this long; toldBusy: the gate was told
		// so. freeIn: the gate was told that no lease frees before
		// this, but the other process that held it gave it back since.
		heldFor  time.Duration
		toldBusy bool
		freeIn   time.Duration
		going    int // pushes of the process already going for a lease
		// leaseBusy: the job's last push found the lease set full
		// (job.LeaseBusy), which this process does not know.
		leaseBusy bool
		shadow    bool
		horizon   time.Duration // the route's booking horizon
		denied    time.Duration // the first booking is denied for this long
		slotIn    time.Duration // how far ahead the bucket's next slot is
		maxHold   time.Duration // 0: DefaultPolicy's
		events    string
		outcome   Outcome
		reserved  []bool // whether each request went on its held slot
		wasted    int
		bookings  int
	}{
		{name: "free: the token, then the lease",
			events: "reserve,acquire,push,release", outcome: Pushed, reserved: []bool{true}, bookings: 1},
		{name: "not known contended, the lease awaited past the grace: the token is booked again", heldFor: 1500 * time.Millisecond,
			events: "reserve,acquire,handover,push,release", outcome: Pushed, reserved: []bool{false}, wasted: 1, bookings: 1},
		{name: "not known contended to the process, but the job's last push found the set full: the lease, then the token", leaseBusy: true, heldFor: 1500 * time.Millisecond,
			events: "acquire,handover,reserve,push,release", outcome: Pushed, reserved: []bool{true}, bookings: 1},
		{name: "the job's last push found the set full, the lease free now: the lease, then the token", leaseBusy: true,
			events: "acquire,reserve,push,release", outcome: Pushed, reserved: []bool{true}, bookings: 1},
		{name: "a lease going to as many pushes of the process as its max: the lease, then the token", going: 1, heldFor: 1500 * time.Millisecond,
			events: "acquire,handover,reserve,push,release", outcome: Pushed, reserved: []bool{true}, bookings: 1},
		{name: "contended, free soon: the lease, then the token", freeIn: 100 * time.Millisecond,
			events: "acquire,reserve,push,release", outcome: Pushed, reserved: []bool{true}, bookings: 1},
		{name: "contended, the lease awaited past the grace: one token, after the lease, none wasted", heldFor: 1500 * time.Millisecond, toldBusy: true,
			events: "handover,reserve,push,release", outcome: Pushed, reserved: []bool{true}, bookings: 1},
		{name: "contended, the token past its grace: the lease goes back while it waits", freeIn: 100 * time.Millisecond, slotIn: time.Second,
			events: "acquire,reserve,release,acquire,push,release", outcome: Pushed, reserved: []bool{true}, bookings: 1},
		{name: "contended, the token beyond blocking distance: the lease goes back, the job is deferred with its slot", freeIn: 100 * time.Millisecond, slotIn: 5 * time.Second,
			events: "acquire,reserve,release", outcome: Deferred, bookings: 1},
		{name: "contended, a horizon's denial: the lease goes back while the push sleeps for its token", freeIn: 100 * time.Millisecond, horizon: 10 * time.Second, denied: 500 * time.Millisecond,
			events: "acquire,reserve,release,reserve,acquire,push,release", outcome: Pushed, reserved: []bool{true}, bookings: 2},
		{name: "contended, no lease within the hold: deferred with no token booked (the store asked as the wait ends)", heldFor: 3 * time.Second, toldBusy: true, maxHold: time.Second,
			events: "acquire", outcome: Deferred, bookings: 0},
		{name: "shadow, contended: the lease, then the token, none wasted", heldFor: 1500 * time.Millisecond, toldBusy: true, shadow: true,
			events: "handover,reserve,push,release", outcome: Pushed, reserved: []bool{true}, bookings: 1},
		{name: "shadow, the job's last push found the set full, none within the hold: deferred before its token and its begin", leaseBusy: true, heldFor: 3 * time.Second, toldBusy: true, maxHold: time.Second, shadow: true,
			events: "acquire", outcome: Deferred, bookings: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, synctestRun(func(t *testing.T) {
			r := newLeaseRig(t)
			if tt.heldFor > 0 {
				r.holdFor(t, f, tt.heldFor)
			}
			if tt.toldBusy {
				r.toldBusy(t, f)
			}
			if tt.freeIn > 0 {
				r.toldBusyFor(t, f, tt.freeIn)
			}
			r.ev.reset()
			start := r.clock.Now()
			r.bookAhead(start.Add(tt.slotIn))
			p := &leasePusher{events: r.ev}
			r.d.Routes = leaseFirstRoute(&f, tt.shadow, tt.horizon)
			if tt.denied > 0 {
				r.fail = []error{&limiter.ExhaustedError{Key: "k", N: 1, RetryAfter: tt.denied}}
				r.d.Jitter = func(time.Duration) time.Duration { return 0 }
			}
			r.events = r.ev
			r.d.Pusher, r.d.Work = p, nil
			if tt.going > 0 {
				r.d.Leases.going["k"] = tt.going
			}
			if tt.maxHold > 0 {
				r.d.Policy.MaxHold = tt.maxHold
			}
			j := testJob(start)
			j.LeaseBusy = tt.leaseBusy
			res, err := r.d.HandleJob(context.Background(), j)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.ev.String(); got != tt.events {
				t.Errorf("events %s; want %s", got, tt.events)
			}
			if res.Outcome != tt.outcome || res.WastedSlots != tt.wasted || len(r.bookings()) != tt.bookings {
				t.Errorf("result %+v after %d bookings; want %s, %d wasted, %d bookings", res, len(r.bookings()), tt.outcome, tt.wasted, tt.bookings)
			}
			if !slices.Equal(p.reserved, tt.reserved) {
				t.Errorf("requests on their held slot %v; want %v", p.reserved, tt.reserved)
			}
			if tt.outcome == Deferred && (len(r.queue.deferred) != 1 || r.queue.deferred[0].j.Hold.Held() != (tt.bookings > 0)) {
				t.Errorf("deferrals %+v; want one, holding a slot only if one was booked", r.queue.deferred)
			}
			// A job deferred for a full lease set says so, for the
			// process that takes it up next.
			if busy := strings.Contains(res.Reason, "in-flight leases held"); len(r.queue.deferred) == 1 && r.queue.deferred[0].j.LeaseBusy != busy {
				t.Errorf("deferred (%s) with LeaseBusy %v; want %v", res.Reason, r.queue.deferred[0].j.LeaseBusy, busy)
			}
			if going := r.d.Leases.going["k"]; going != tt.going {
				t.Errorf("%d pushes going for a lease after the push, want the %d before it", going, tt.going)
			}
			// Past the other push's hold, a lease the push kept would
			// still be live.
			time.Sleep(tt.heldFor)
			if left := r.leasesLeft(t, "k"); left != 0 {
				t.Errorf("%d leases left held after the push", left)
			}
		}))
	}
}

// quotaLeaseRoute is quotaRoute's route under a lease set of one.
func quotaLeaseRoute() fixedRoute {
	r := quotaRoute(false)
	r.InFlight = &limiter.InFlight{Key: "k", Max: 1, Hold: time.Minute}
	return r
}

// A quota route takes its token now and sleeps for the next one within
// the hold: with its lease taken first (contended), the lease goes back
// for that sleep, and the push takes one again with its token in hand.
func TestContendedQuotaRouteFreesItsLeaseWhileItWaitsForItsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newLeaseRig(t)
		r.toldBusyFor(t, limiter.InFlight{Key: "k", Max: 1, Hold: time.Minute}, 100*time.Millisecond)
		r.ev.reset()
		r.events = r.ev
		r.bookAhead(r.clock.Now().Add(300 * time.Millisecond))
		p := &leasePusher{events: r.ev}
		r.d.Routes, r.d.Pusher, r.d.Work = quotaLeaseRoute(), p, nil
		r.d.Can.Quota, r.d.Can.QuotaAlone = r.lim.TakeWithQuota, r.lim.TakeQuota
		res, err := r.d.HandleJob(context.Background(), testJob(r.clock.Now()))
		if err != nil || res.Outcome != Pushed {
			t.Fatalf("result %+v, %v; want pushed", res, err)
		}
		if got, want := r.ev.String(), "acquire,take,release,take,acquire,push,release"; got != want {
			t.Fatalf("events %s; want %s", got, want)
		}
	})
}
