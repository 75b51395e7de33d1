package dispatch

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/fallback"
)

// modeRouter routes every job to one bucket of 4/s, burst 8, in the given
// modes.
func modeRoute(shadow, localShare bool) fixedRoute {
	return kRoute(func(r *Route) { r.Shadow, r.LocalShare = shadow, localShare })
}

func storeDown() error {
	return fmt.Errorf("reserve: %w: connection refused", limiter.ErrUnavailable)
}

// A shadow route books its slot but pushes at once, and says enforcement
// would have deferred it (slot beyond blocking distance) and for how long.
func TestShadowPushesAtOnceAndReportsWouldDefer(t *testing.T) {
	r := newRig(t)
	r.d.Routes = modeRoute(true, false)
	start := r.clock.Now()
	r.bookAhead(start.Add(5 * time.Second)) // the bucket is booked 5 s ahead
	res, err := r.d.HandleJob(t.Context(), testJob(start))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Pushed || len(r.push.bodies) != 1 || len(r.queue.deferred) != 0 {
		t.Fatalf("result %+v, %d pushes, %d deferrals; want pushed, not deferred", res, len(r.push.bodies), len(r.queue.deferred))
	}
	if slept := r.clock.Now().Sub(start); slept != 0 {
		t.Fatalf("shadow push slept %v for its slot, want 0", slept)
	}
	if !res.ShadowWouldDefer || res.ShadowWouldShed || res.ShadowWait != 5*time.Second {
		t.Fatalf("shadow record: would defer %v, would shed %v, wait %v; want defer, no shed, 5s", res.ShadowWouldDefer, res.ShadowWouldShed, res.ShadowWait)
	}
	if len(r.bookings()) != 1 {
		t.Fatalf("%d reservations, want 1 (the bucket shows what enforcement would do)", len(r.bookings()))
	}
}

// A slot within blocking distance: enforcement would have slept, not
// deferred; the shadow push still goes at once and reports the wait.
func TestShadowShortWaitIsNotWouldDefer(t *testing.T) {
	r := newRig(t)
	r.d.Routes = modeRoute(true, false)
	start := r.clock.Now()
	r.bookAhead(start.Add(300 * time.Millisecond))
	res, err := r.d.HandleJob(t.Context(), testJob(start))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Pushed || res.ShadowWouldDefer || res.ShadowWait != 300*time.Millisecond || r.clock.Now() != start {
		t.Fatalf("result %+v after %v; want pushed at once, wait 300ms, not would-defer", res, r.clock.Now().Sub(start))
	}
}

// No slot before the job's deadline: enforcement would shed it; shadow
// pushes it and says so.
func TestShadowReportsWouldShed(t *testing.T) {
	r := newRig(t)
	r.d.Routes = modeRoute(true, false)
	start := r.clock.Now()
	r.fail = []error{&limiter.ExhaustedError{Key: "k", N: 1, RetryAfter: 40 * time.Second}}
	j := testJob(start)
	j.Deadline = start.Add(30 * time.Second)
	res, err := r.d.HandleJob(t.Context(), j)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Pushed || !res.ShadowWouldShed || res.ShadowWouldDefer || res.ShadowWait != 40*time.Second || len(r.queue.dead) != 0 {
		t.Fatalf("result %+v, dead %v; want pushed, would shed, wait 40s", res, r.queue.dead)
	}
}

// Enforce (the default) with the same booked bucket defers: the shadow
// tests above are not passing because nothing would wait.
func TestEnforceDefersWhereShadowPushes(t *testing.T) {
	r := newRig(t)
	r.d.Routes = modeRoute(false, false)
	start := r.clock.Now()
	r.bookAhead(start.Add(5 * time.Second))
	res, err := r.d.HandleJob(t.Context(), testJob(start))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Deferred || len(r.push.bodies) != 0 || res.ShadowWouldDefer {
		t.Fatalf("result %+v, %d pushes; want deferred, no push, no shadow record", res, len(r.push.bodies))
	}
}

// With the store down, a local-share route pushes within this process's
// share (rate and burst ÷ instances), sleeps for a token that comes within
// BlockThreshold, and defers until the share has one when it comes later.
func TestLocalSharePacesWhileStoreDown(t *testing.T) {
	r := newRig(t)
	r.d.Routes = modeRoute(false, true)
	r.d.LocalShare = fallback.New(4) // 4/s burst 8 → 1/s burst 2 here
	start := r.clock.Now()
	handle := func() Result {
		t.Helper()
		r.fail = []error{storeDown()}
		res, err := r.d.HandleJob(t.Context(), testJob(r.clock.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if !res.StoreError {
			t.Fatalf("result %+v does not report the store error", res)
		}
		return res
	}
	// The share starts empty (the shared bucket may have just spent its
	// burst): each of the first two jobs sleeps 1 s for its token.
	for i := 1; i <= 2; i++ {
		if res := handle(); res.Outcome != Pushed || res.LocalShares != 1 || r.clock.Now().Sub(start) != time.Duration(i)*time.Second {
			t.Fatalf("job %d: %+v after %v; want pushed under the local share after %ds", i, res, r.clock.Now().Sub(start), i)
		}
	}
	r.d.Policy.BlockThreshold = 500 * time.Millisecond
	if res := handle(); res.Outcome != Deferred || r.queue.deferred[0].wait != time.Second || len(r.push.bodies) != 2 {
		t.Fatalf("third job: %+v, deferrals %+v; want deferred 1s (until the share has a token), not the store cooldown", res, r.queue.deferred)
	}
	_ = r.clock.Sleep(t.Context(), time.Second)
	if res := handle(); res.Outcome != Pushed || len(r.push.bodies) != 3 {
		t.Fatalf("a second later: %+v; want pushed", res)
	}
}

// The same outage on a closed route (the default) defers every job for the
// store cooldown and pushes nothing; so does a local-share route with no
// pacer configured.
func TestClosedDefersWhileStoreDown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route fixedRoute
		pacer *fallback.Pacer
	}{
		{"closed", modeRoute(false, false), fallback.New(4)},
		{"local-share without a pacer", modeRoute(false, true), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.d.Routes, r.d.LocalShare = tc.route, tc.pacer
			r.fail = []error{storeDown()}
			res, err := r.d.HandleJob(t.Context(), testJob(r.clock.Now()))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != Deferred || len(r.push.bodies) != 0 || r.queue.deferred[0].wait != DefaultPolicy.StoreCooldown || res.LocalShares != 0 {
				t.Fatalf("result %+v, %d pushes; want deferred for the store cooldown", res, len(r.push.bodies))
			}
		})
	}
}

// A local-share route still fails closed on a denial: the local share is
// only for an unreachable store.
func TestLocalShareOnlyForAnUnreachableStore(t *testing.T) {
	r := newRig(t)
	r.d.Routes, r.d.LocalShare = modeRoute(false, true), fallback.New(1)
	r.fail = []error{&limiter.ExhaustedError{Key: "k", N: 1, RetryAfter: time.Minute}}
	res, err := r.d.HandleJob(t.Context(), testJob(r.clock.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Deferred || len(r.push.bodies) != 0 || res.LocalShares != 0 {
		t.Fatalf("result %+v; want deferred by the denial, no local push", res)
	}
}

// A local-share push whose retry finds the store down (otapush's acquire
// Waits on the shared bucket) is deferred for the store cooldown as
// before: retries are not paced locally, so they must not flood.
func TestLocalShareRetryWithStoreDownDefers(t *testing.T) {
	r := newRig(t)
	r.d.Routes, r.d.LocalShare = modeRoute(false, true), fallback.New(1)
	r.vendor(answering(http.StatusInternalServerError))
	r.fail, r.waits = []error{storeDown()}, []error{storeDown()}
	res, err := r.d.HandleJob(t.Context(), testJob(r.clock.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Deferred || r.queue.deferred[0].wait != DefaultPolicy.StoreCooldown || r.queue.deferred[0].j.Failures != 0 {
		t.Fatalf("result %+v, deferrals %+v; want deferred for the store cooldown, not counted as a failure", res, r.queue.deferred)
	}
}

// When the store comes back, the first reservation books the pushes the
// local share let through, so that the shared bucket, full again, does not
// grant its burst on top of them; the next ones ask for one token again.
func TestLocalSharePushesAreBookedWhenTheStoreComesBack(t *testing.T) {
	r := newRig(t)
	r.d.Routes, r.d.LocalShare = modeRoute(false, true), fallback.New(1) // 4/s burst 8
	for i := 0; i < 3; i++ {
		r.fail = []error{storeDown()}
		if res, err := r.d.HandleJob(t.Context(), testJob(r.clock.Now())); err != nil || res.LocalShares != 1 {
			t.Fatalf("outage job %d: %+v, %v; want a local push", i, res, err)
		}
	}
	for i := 0; i < 2; i++ {
		if _, err := r.d.HandleJob(t.Context(), testJob(r.clock.Now())); err != nil {
			t.Fatal(err)
		}
	}
	// During the outage each attempt asks for the pushes pending so far
	// (and fails); the first after it books all 3 with its own token.
	if want := []int{1, 2, 3, 4, 1}; fmt.Sprint(r.bookings()) != fmt.Sprint(want) {
		t.Fatalf("tokens asked per reservation: %v, want %v (the 3 local pushes booked with the first one after the outage)", r.bookings(), want)
	}
}

// With the store down, a local-share route does not push inside a silence
// this process knows a vendor asked of one of its buckets (its own, an
// Also's, any shard, which a 429 silences together): the shared bucket
// enforced that 429's Retry-After with a penalty the local share knows
// nothing of. The job comes back at the silence's end. A silence that is
// over, or of another bucket, does not hold it. (Adversary seed 234 sent
// requests inside a 15-minute silence from a local share.)
func TestLocalShareWaitsOutAKnownSilence(t *testing.T) {
	bucket := limiter.Bucket{Key: "k", Limit: limiter.PerSecond(4, 8)}
	also := limiter.Bucket{Key: "p", Limit: limiter.PerSecond(10, 10)}
	sharded := &limiter.ShardedBucket{Key: "k", Limit: bucket.Limit, Shards: 2}
	tests := []struct {
		name    string
		route   Route
		silence map[string]time.Duration // its end, from the job's start
		want    time.Duration            // the deferral; 0: pushed under the local share
	}{
		{"the route's bucket", Route{Bucket: bucket}, map[string]time.Duration{"k": 15 * time.Minute}, 15 * time.Minute},
		{"an Also bucket, the latest end", Route{Bucket: bucket, Also: []limiter.Bucket{also}}, map[string]time.Duration{"k": 20 * time.Second, "p": 30 * time.Second}, 30 * time.Second},
		{"a shard", Route{Bucket: bucket, Sharded: sharded}, map[string]time.Duration{limiter.ShardKey("k", 1): 40 * time.Second}, 40 * time.Second},
		{"a silence over", Route{Bucket: bucket}, map[string]time.Duration{"k": -time.Second}, 0},
		{"another bucket's", Route{Bucket: bucket}, map[string]time.Duration{"q": time.Minute}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			start := r.clock.Now()
			route := tt.route
			route.URL, route.Header, route.LocalShare = "http://ota.invalid", http.Header{}, true
			r.d.Routes, r.d.LocalShare = fixedRoute(route), fallback.New(1)
			for k, d := range tt.silence {
				if err := r.lim.Penalize(t.Context(), limiter.Bucket{Key: k, Limit: bucket.Limit}, start.Add(d)); err != nil {
					t.Fatal(err)
				}
			}
			down := func() error { return storeDown() }
			r.d.Can = Capabilities{KnownSilence: r.lim.KnownSilence,
				Shards: func(context.Context, limiter.ShardedBucket, int, time.Duration) (limiter.Reservation, error) {
					return limiter.Reservation{}, down()
				},
				Multi: func(context.Context, []limiter.Bucket, int, time.Duration) (limiter.MultiReservation, error) {
					return limiter.MultiReservation{}, down()
				}}
			r.fail = []error{storeDown()}
			res, err := r.d.HandleJob(t.Context(), testJob(start))
			if err != nil {
				t.Fatal(err)
			}
			if !res.StoreError {
				t.Fatalf("result %+v does not report the store error", res)
			}
			if tt.want == 0 {
				if res.Outcome != Pushed || res.LocalShares != 1 || len(r.push.bodies) != 1 {
					t.Fatalf("result %+v, %d pushes; want pushed under the local share", res, len(r.push.bodies))
				}
				return
			}
			if res.Outcome != Deferred || len(r.push.bodies) != 0 || res.LocalShares != 0 || len(r.queue.deferred) != 1 || r.queue.deferred[0].wait != tt.want {
				t.Fatalf("result %+v, %d pushes, deferrals %+v; want no push, deferred %v (to the silence's end)", res, len(r.push.bodies), r.queue.deferred, tt.want)
			}
		})
	}
}
