package dispatch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// quotaTaker answers TakeWithQuota from a script (limitertest has no
// quotas).
type quotaTaker struct {
	script []error
	takes  int
	ids    []string
	alone  int       // takes of the quota alone
	events *eventLog // if set, each take is recorded among a lease's events
}

func (q *quotaTaker) TakeWithQuota(_ context.Context, buckets []limiter.Bucket, qb limiter.QuotaBucket, n int, id string) (limiter.MultiReservation, error) {
	if q.events != nil {
		q.events.add("take")
	}
	q.takes++
	q.ids = append(q.ids, id)
	if len(q.script) == 0 {
		return limiter.MultiReservation{}, nil
	}
	err := q.script[0]
	q.script = q.script[1:]
	return limiter.MultiReservation{}, err
}

// TakeQuota takes the quota alone, for a slot held already: granted.
func (q *quotaTaker) TakeQuota(_ context.Context, qb limiter.QuotaBucket, n int, id string) (limiter.QuotaGrant, error) {
	q.alone++
	return limiter.QuotaGrant{Key: qb.Key}, nil
}

// quotaRoute is the rig's route with a daily quota of 5, in shadow mode
// when shadow.
func quotaRoute(shadow bool) fixedRoute {
	return kRoute(func(r *Route) {
		r.Shadow, r.Quota = shadow, &limiter.QuotaBucket{Key: "k", Quota: gcra.Quota{Count: 5, Period: gcra.Day}}
	})
}

func TestQuotaRoute(t *testing.T) {
	spent := &limiter.ExhaustedError{Key: limiter.QuotaKey("k"), N: 1, RetryAfter: 5 * time.Hour}
	noToken := &limiter.ExhaustedError{Key: "k", N: 1, RetryAfter: 300 * time.Millisecond}
	tests := []struct {
		name     string
		script   []error
		shadow   bool
		deadline time.Duration // 0: none
		noTaker  bool
		check    func(t *testing.T, r *rig, q *quotaTaker, res Result, slept time.Duration)
	}{
		{name: "granted: pushed now, no slot booked ahead", check: func(t *testing.T, r *rig, q *quotaTaker, res Result, slept time.Duration) {
			if res.Outcome != Pushed || q.takes != 1 || q.alone != 0 || len(r.bookings()) != 0 || slept != 0 || q.ids[0] != "lane@tok" {
				t.Fatalf("result %+v after %d takes (ids %v) and %d of the quota alone, %d reservations, slept %v; want pushed after one take under the job's id", res, q.takes, q.ids, q.alone, len(r.bookings()), slept)
			}
		}},
		{name: "no token now: waited for within the hold", script: []error{noToken}, check: func(t *testing.T, r *rig, q *quotaTaker, res Result, slept time.Duration) {
			if res.Outcome != Pushed || q.takes != 2 || slept != 300*time.Millisecond {
				t.Fatalf("result %+v after %d takes, slept %v; want pushed after sleeping 300ms", res, q.takes, slept)
			}
		}},
		{name: "quota spent: deferred to the reset and the job's spread", script: []error{spent}, check: func(t *testing.T, r *rig, q *quotaTaker, res Result, slept time.Duration) {
			if res.Outcome != Deferred || len(r.queue.deferred) != 1 || r.queue.deferred[0].wait != 5*time.Hour || slept != 0 ||
				!strings.Contains(res.Reason, "quota of 5 per day spent") || len(r.push.bodies) != 0 {
				t.Fatalf("result %+v, deferrals %+v, slept %v; want deferred 5h for the spent quota, no push", res, r.queue.deferred, slept)
			}
		}},
		{name: "quota spent past the deadline: shed, nothing spent", script: []error{spent}, deadline: time.Hour,
			check: func(t *testing.T, r *rig, q *quotaTaker, res Result, slept time.Duration) {
				if res.Outcome != Shed || len(r.push.bodies) != 0 {
					t.Fatalf("result %+v; want shed", res)
				}
			}},
		{name: "shadow: pushed anyway, recorded", script: []error{spent}, shadow: true,
			check: func(t *testing.T, r *rig, q *quotaTaker, res Result, slept time.Duration) {
				if res.Outcome != Pushed || !res.ShadowWouldDefer || res.ShadowWait != 5*time.Hour {
					t.Fatalf("result %+v; want pushed, recording a 5h deferral", res)
				}
			}},
		{name: "store down: fail closed", script: []error{fmt.Errorf("boom: %w", limiter.ErrUnavailable)},
			check: func(t *testing.T, r *rig, q *quotaTaker, res Result, slept time.Duration) {
				if res.Outcome != Deferred || !res.StoreError || r.queue.deferred[0].wait != DefaultPolicy.StoreCooldown {
					t.Fatalf("result %+v; want deferred for the store cooldown", res)
				}
			}},
		{name: "a limiter that cannot take a quota: dead-lettered", noTaker: true,
			check: func(t *testing.T, r *rig, q *quotaTaker, res Result, slept time.Duration) {
				if res.Outcome != DeadLettered || !strings.Contains(r.queue.dead[0], "cannot take one") {
					t.Fatalf("result %+v, dead %v; want dead-lettered", res, r.queue.dead)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			q := &quotaTaker{script: tt.script}
			r.d.Routes, r.d.Work = quotaRoute(tt.shadow), nil
			if !tt.noTaker {
				r.d.Can.Quota, r.d.Can.QuotaAlone = q.TakeWithQuota, q.TakeQuota
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
			tt.check(t, r, q, res, slept)
		})
	}
}
