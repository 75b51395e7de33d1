package dispatch

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// quotaRoute is the rig's route with a daily quota of 5, in shadow mode
// when shadow.
func quotaRoute(shadow bool) fixedRoute {
	return kRoute(func(r *Route) {
		r.Shadow, r.Quota = shadow, &limiter.QuotaBucket{Key: "k", Quota: gcra.Quota{Count: 5, Period: gcra.Day}}
	})
}

// takes is how many takes with the quota the rig's limiter was asked, and
// how many of the quota alone.
func (r *rig) takes() (with, alone int) {
	for _, c := range r.lim.Calls() {
		switch {
		case c.Op == "TakeWithQuota" && c.Key == "k":
			with++
		case c.Op == "TakeQuota":
			alone++
		}
	}
	return with, alone
}

// spendQuota has others spend the rig's quota of 5 a day.
func (r *rig) spendQuota() {
	r.t.Helper()
	q := *quotaRoute(false).Quota
	if _, err := r.lim.TakeQuota(context.Background(), q, 5, "others"); err != nil {
		r.t.Fatal(err)
	}
}

func TestQuotaRoute(t *testing.T) {
	// The rig's clock starts at noon UTC: a daily quota resets 12 h on,
	// and the job's deferral reaches its offset in the minute after (its
	// id's FNV-1a, modulo a minute in µs).
	h := fnv.New64a()
	h.Write([]byte(testJob(time.Time{}).ID))
	toReset := 12*time.Hour + time.Duration(h.Sum64()%60e6)*time.Microsecond
	tests := []struct {
		name     string
		setup    func(r *rig)
		shadow   bool
		deadline time.Duration // 0: none
		noTaker  bool
		check    func(t *testing.T, r *rig, res Result, slept time.Duration)
	}{
		{name: "granted: pushed now, no slot booked ahead", check: func(t *testing.T, r *rig, res Result, slept time.Duration) {
			if with, alone := r.takes(); res.Outcome != Pushed || with != 1 || alone != 0 || len(r.bookings()) != 0 || slept != 0 {
				t.Fatalf("result %+v after %d takes and %d of the quota alone, %d reservations, slept %v; want pushed after one take", res, with, alone, len(r.bookings()), slept)
			}
		}},
		{name: "no token now: waited for within the hold", setup: func(r *rig) { r.bookAhead(r.clock.Now().Add(300 * time.Millisecond)) },
			check: func(t *testing.T, r *rig, res Result, slept time.Duration) {
				if with, _ := r.takes(); res.Outcome != Pushed || with != 2 || slept != 300*time.Millisecond {
					t.Fatalf("result %+v after %d takes, slept %v; want pushed after sleeping 300ms", res, with, slept)
				}
			}},
		{name: "quota spent: deferred to the reset and the job's spread", setup: (*rig).spendQuota, check: func(t *testing.T, r *rig, res Result, slept time.Duration) {
			if res.Outcome != Deferred || len(r.queue.deferred) != 1 || r.queue.deferred[0].wait != toReset || slept != 0 ||
				!strings.Contains(res.Reason, "quota of 5 per day spent") || len(r.push.bodies) != 0 {
				t.Fatalf("result %+v, deferrals %+v, slept %v; want deferred %v for the spent quota, no push", res, r.queue.deferred, slept, toReset)
			}
		}},
		{name: "quota spent past the deadline: shed, nothing spent", setup: (*rig).spendQuota, deadline: time.Hour,
			check: func(t *testing.T, r *rig, res Result, slept time.Duration) {
				if res.Outcome != Shed || len(r.push.bodies) != 0 {
					t.Fatalf("result %+v; want shed", res)
				}
			}},
		{name: "shadow: pushed anyway, recorded", setup: (*rig).spendQuota, shadow: true,
			check: func(t *testing.T, r *rig, res Result, slept time.Duration) {
				if res.Outcome != Pushed || !res.ShadowWouldDefer || res.ShadowWait != toReset {
					t.Fatalf("result %+v; want pushed, recording a %v deferral", res, toReset)
				}
			}},
		{name: "store down: fail closed", setup: func(r *rig) { r.fail = []error{fmt.Errorf("boom: %w", limiter.ErrUnavailable)} },
			check: func(t *testing.T, r *rig, res Result, slept time.Duration) {
				if res.Outcome != Deferred || !res.StoreError || r.queue.deferred[0].wait != DefaultPolicy.StoreCooldown {
					t.Fatalf("result %+v; want deferred for the store cooldown", res)
				}
			}},
		{name: "a limiter that cannot take a quota: dead-lettered", noTaker: true,
			check: func(t *testing.T, r *rig, res Result, slept time.Duration) {
				if res.Outcome != DeadLettered || !strings.Contains(r.queue.dead[0], "cannot take one") {
					t.Fatalf("result %+v, dead %v; want dead-lettered", res, r.queue.dead)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.d.Routes, r.d.Work = quotaRoute(tt.shadow), nil
			if !tt.noTaker {
				r.d.Can.Quota, r.d.Can.QuotaAlone = r.lim.TakeWithQuota, r.lim.TakeQuota
			}
			if tt.setup != nil {
				tt.setup(r)
			}
			var slept time.Duration
			r.d.Sleep = func(ctx context.Context, d time.Duration) error { slept += d; return r.clock.Sleep(ctx, d) }
			j := testJob(r.clock.Now())
			j.Payload = []byte(`{}`)
			if tt.deadline > 0 {
				j.Deadline = r.clock.Now().Add(tt.deadline)
			}
			res, err := r.d.HandleJob(context.Background(), j)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r, res, slept)
		})
	}
}
