package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// lifeRoute routes every job to one bucket of 4/s, burst 8, with the
// given lifetime bounds (zero: the policy's).
func lifeRoute(maxAge time.Duration, maxDeferrals int) fixedRoute {
	return kRoute(func(r *Route) { r.MaxAge, r.MaxDeferrals = maxAge, maxDeferrals })
}

// abandoning is the rig's work that also gives a dead-lettered job's claim
// up, answering err.
type abandoning struct {
	*work
	abandoned []string
	err       error
}

func (a *abandoning) Abandon(_ context.Context, j job.Job, _ Outcome) error {
	a.abandoned = append(a.abandoned, j.ID)
	return a.err
}

func TestJobLifetime(t *testing.T) {
	day := DefaultPolicy.MaxAge
	maxDef := DefaultPolicy.MaxDeferrals
	tests := []struct {
		name string
		// maxAge and maxDeferrals are the route's bounds (zero: the
		// policy's).
		maxAge       time.Duration
		maxDeferrals int
		// setup shapes the job and the rig; now is the rig's clock.
		setup func(r *rig, w *abandoning, j *job.Job, now time.Time)
		want  Outcome
		// reason is a substring of the dead-letter reason or result reason.
		reason    string
		pushes    int
		deferrals int
		abandoned int
		wasted    int
		// maxDelay, if set, is the bound the one reservation asked for.
		maxDelay   time.Duration
		storeError bool
		// next is how far ahead the bucket's next slot lies; fail, the
		// store's answer to the first reservation.
		next time.Duration
		fail error
	}{
		{name: "first seen max_age ago: expired at receipt, no slot booked",
			setup: func(_ *rig, _ *abandoning, j *job.Job, now time.Time) { j.FirstSeen = now.Add(-day) },
			want:  Expired, reason: "expired: first seen", abandoned: 1},
		{name: "a second before max_age with a slot now: pushed, its reservation bounded by the second",
			setup: func(_ *rig, _ *abandoning, j *job.Job, now time.Time) { j.FirstSeen = now.Add(-day + time.Second) },
			want:  Pushed, pushes: 1, maxDelay: time.Second},
		{name: "the route's max_age, not the policy's", maxAge: time.Hour,
			setup: func(_ *rig, _ *abandoning, j *job.Job, now time.Time) { j.FirstSeen = now.Add(-time.Hour) },
			want:  Expired, reason: "max_age 1h0m0s", abandoned: 1},
		{name: "no slot before max_age ends: expired, no token spent",
			setup: func(_ *rig, _ *abandoning, j *job.Job, now time.Time) { j.FirstSeen = now.Add(-day + 10*time.Second) },
			next:  30 * time.Second, want: Expired, reason: "no slot before its max_age", abandoned: 1, maxDelay: 10 * time.Second},
		{name: "max_deferrals reached and its slot far: expired instead of deferred, slot wasted",
			setup: func(_ *rig, _ *abandoning, j *job.Job, _ time.Time) { j.Deferrals = maxDef },
			next:  5 * time.Second, want: Expired, reason: "expired: 200 deferrals, max_deferrals 200 (was to be deferred: waiting for its reserved slot)", abandoned: 1, wasted: 1},
		{name: "one deferral left: deferred",
			setup: func(_ *rig, _ *abandoning, j *job.Job, _ time.Time) { j.Deferrals = maxDef - 1 },
			next:  5 * time.Second, want: Deferred, deferrals: 1},
		{name: "max_deferrals reached but its slot is now: pushed",
			setup: func(_ *rig, _ *abandoning, j *job.Job, _ time.Time) { j.Deferrals = maxDef },
			want:  Pushed, pushes: 1},
		{name: "the route's max_deferrals, not the policy's", maxDeferrals: 10,
			setup: func(_ *rig, _ *abandoning, j *job.Job, _ time.Time) { j.Deferrals = 10 },
			next:  5 * time.Second, want: Expired, reason: "10 deferrals, max_deferrals 10", abandoned: 1, wasted: 1},
		{name: "a deferral that would come back past max_age: expired now",
			setup: func(_ *rig, _ *abandoning, j *job.Job, now time.Time) {
				j.FirstSeen, j.NotBefore = now.Add(-day+30*time.Second), now.Add(time.Minute)
			},
			want: Expired, reason: "past its max_age", abandoned: 1},
		{name: "store down at max_deferrals: expired, not deferred for the cooldown again",
			setup: func(_ *rig, _ *abandoning, j *job.Job, _ time.Time) { j.Deferrals = maxDef },
			fail:  storeDown(), want: Expired, reason: "(was to be deferred: limiter store unavailable)", abandoned: 1, storeError: true},
		{name: "a duplicate whose work moved on: dropped, not dead-lettered",
			setup: func(_ *rig, w *abandoning, j *job.Job, now time.Time) {
				j.FirstSeen, w.err = now.Add(-day), ErrNothingToPush
			},
			want: Coalesced, reason: "not expired", abandoned: 1},
		{name: "giving the work up fails: dead-lettered all the same",
			setup: func(_ *rig, w *abandoning, j *job.Job, now time.Time) {
				j.FirstSeen, w.err = now.Add(-day), errors.New("dynamodb down")
			},
			want: Expired, reason: "expired: first seen", abandoned: 1, storeError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			if tt.fail != nil {
				r.fail = []error{tt.fail}
			}
			if tt.next > 0 {
				r.bookAhead(r.clock.Now().Add(tt.next))
			}
			w := &abandoning{work: r.work}
			r.d.Routes, r.d.Work = lifeRoute(tt.maxAge, tt.maxDeferrals), w
			j := testJob(r.clock.Now())
			tt.setup(r, w, &j, r.clock.Now())
			res, err := r.d.HandleJob(t.Context(), j)
			if err != nil {
				t.Fatal(err)
			}
			reasons := strings.Join(append(r.queue.dead, res.Reason), " | ")
			if res.Outcome != tt.want || !strings.Contains(reasons, tt.reason) {
				t.Fatalf("result %+v, dead-letter reasons %q; want %s mentioning %q", res, r.queue.dead, tt.want, tt.reason)
			}
			dead := 0
			if tt.want == Expired {
				dead = 1
			}
			if len(r.queue.dead) != dead || len(r.push.bodies) != tt.pushes || len(r.queue.deferred) != tt.deferrals || len(w.abandoned) != tt.abandoned {
				t.Fatalf("%d dead-lettered, %d pushes, %d deferrals, %d abandoned; want %d, %d, %d, %d",
					len(r.queue.dead), len(r.push.bodies), len(r.queue.deferred), len(w.abandoned), dead, tt.pushes, tt.deferrals, tt.abandoned)
			}
			if res.WastedSlots != tt.wasted || res.StoreError != tt.storeError {
				t.Fatalf("wasted %d, store error %v; want %d, %v", res.WastedSlots, res.StoreError, tt.wasted, tt.storeError)
			}
			if want := fmt.Sprintf("[reserve burst 8 within %v]", tt.maxDelay); tt.maxDelay != 0 && fmt.Sprint(reservations(r.lim)) != want {
				t.Fatalf("reservations %v, want %s", reservations(r.lim), want)
			}
		})
	}
}

// A payload job (no Work) expires the same way, its own body going to the
// dead-letter queue.
func TestPayloadJobExpires(t *testing.T) {
	r := newRig(t)
	r.d.Work = nil
	j := testJob(r.clock.Now().Add(-DefaultPolicy.MaxAge))
	j.Payload = []byte(`{"n":1}`)
	res, err := r.d.HandleJob(t.Context(), j)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Expired || len(r.queue.dead) != 1 || len(r.push.bodies) != 0 || len(r.bookings()) != 0 {
		t.Fatalf("result %+v, %d reservations; want expired, nothing reserved or pushed", res, len(r.bookings()))
	}
}

// Whatever keeps a job coming back, it ends: each case runs a job through
// the deferred queue (the clock moved on by each wait, Deferrals counted
// as deferral.Queue counts them) until it stops coming back.
func TestNothingLoopsForever(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *rig, w *abandoning)
		want  Outcome
		// deferrals is how many trips the job made before it ended, and
		// lived how long after it was first seen.
		deferrals int
		lived     time.Duration
	}{
		// 200 trips of the 10 s store cooldown, each handled at once.
		{"the limiter's store never comes back", func(r *rig, _ *abandoning) {
			r.d.Limiter = limitertest.New(limitertest.WithFault(func(string, string) error { return storeDown() }))
		},
			Expired, 200, 200 * 10 * time.Second},
		// Rechecked every 15 minutes: the 96th trip would be back at 24h.
		{"its lane is rechecked every 15 minutes forever", func(r *rig, w *abandoning) {
			w.beginErr = &RecheckError{Reason: "owned by a worker that never finishes"}
		}, Expired, 95, 95 * 15 * time.Minute},
		// A vendor that answers 500 forever: MaxFailures ends it,
		// backing off 2 s·2^k: 2+4+…+256 s, and each of its 9 pushes
		// retried within itself, its attempts 1 ms apart (the client's
		// backoff, its jitter the test's).
		{"the vendor answers 500 forever", func(r *rig, _ *abandoning) {
			r.vendor(answering(http.StatusInternalServerError))
		}, DeadLettered, 8, 510*time.Second + 9*time.Duration(otapush.DefaultPolicy.MaxAttempts-1)*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			w := &abandoning{work: r.work}
			r.d.Work = w
			tt.setup(r, w)
			start := r.clock.Now()
			j := testJob(start)
			var res Result
			for trip := 0; ; trip++ {
				if trip > 100_000 {
					t.Fatalf("still coming back after %d trips (%v)", trip, r.clock.Now().Sub(start))
				}
				if re, ok := w.beginErr.(*RecheckError); ok {
					re.At = r.clock.Now().Add(15 * time.Minute)
				}
				var err error
				if res, err = r.d.HandleJob(t.Context(), j); err != nil {
					t.Fatal(err)
				}
				if res.Outcome != Deferred {
					break
				}
				d := r.queue.deferred[len(r.queue.deferred)-1]
				j = d.j
				j.Deferrals++
				_ = r.clock.Sleep(t.Context(), d.wait)
			}
			if res.Outcome != tt.want || len(r.queue.deferred) != tt.deferrals || r.clock.Now().Sub(start) != tt.lived {
				t.Fatalf("ended %s (%s) after %d deferrals and %v; want %s after %d and %v",
					res.Outcome, res.Reason, len(r.queue.deferred), r.clock.Now().Sub(start), tt.want, tt.deferrals, tt.lived)
			}
		})
	}
}

func TestPolicyRefusesUnboundedLifetime(t *testing.T) {
	for _, p := range []func(*Policy){func(p *Policy) { p.MaxAge = 0 }, func(p *Policy) { p.MaxDeferrals = 0 }} {
		pol := DefaultPolicy
		p(&pol)
		if err := pol.Validate(); err == nil {
			t.Errorf("policy %+v accepted, want it refused", pol)
		}
	}
}
