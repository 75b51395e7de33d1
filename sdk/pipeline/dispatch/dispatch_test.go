package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/otapush/otapushtest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// pusher takes every push, and records its body and what the dispatcher
// handed the client with it (Request.Stamp, which no vendor sees); a test
// of what a vendor's answer does pushes through the real client instead
// (rig.vendor).
type pusher struct {
	bodies []string
	stamps []*limiter.Stamp // each push's Request.Stamp
}

func (p *pusher) Push(_ context.Context, req otapush.Request) (otapush.Response, error) {
	p.bodies = append(p.bodies, string(req.Body))
	p.stamps = append(p.stamps, req.Stamp)
	return otapush.Response{Attempts: 1}, nil
}

type deferred struct {
	j    job.Job
	wait time.Duration
}

type fakeQueue struct {
	deferred []deferred
	dead     []string
}

func (q *fakeQueue) Defer(_ context.Context, j job.Job, wait time.Duration) error {
	q.deferred = append(q.deferred, deferred{j, wait})
	return nil
}

func (q *fakeQueue) DeadLetter(_ context.Context, body, reason string) error {
	q.dead = append(q.dead, reason)
	return nil
}

// kRoute is the rig's route: every job to one bucket "k" of 4/s, burst
// 8, with the fields set sets.
func kRoute(set ...func(*Route)) fixedRoute {
	r := Route{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(4, 8)}, URL: "http://ota.invalid", Header: http.Header{}}
	for _, s := range set {
		s(&r)
	}
	return fixedRoute(r)
}

// work is a scripted Work: Begin returns beginErr or a body; Done hands
// back `more` further jobs, each not before linger after the last.
type work struct {
	clock    clock
	beginErr error
	more     int
	linger   time.Duration
	holds    int
	done     int
}

func (w *work) Begin(_ context.Context, j job.Job) (job.Job, Payload, error) {
	if w.beginErr != nil {
		return j, Payload{}, w.beginErr
	}
	return j, Payload{Body: []byte("state of " + j.ID), Items: 2}, nil
}

func (w *work) Done(_ context.Context, j job.Job, _ Payload) (*job.Job, error) {
	w.done++
	if w.more == 0 {
		return nil, nil
	}
	w.more--
	next := j
	next.ID = j.ID + "+"
	next.Hold = job.Hold{}
	next.NotBefore = w.clock.Now().Add(w.linger)
	return &next, nil
}

func (w *work) Hold(context.Context, job.Job, time.Time) error {
	w.holds++
	return nil
}

// rig is a dispatcher of kRoute's jobs, each a job of work, on limitertest's
// limiter and the rig's clock. The dispatcher can do nothing of the
// limiter's but Reserve and KnownSilence (its Can); a test gives it more.
type rig struct {
	t     *testing.T
	clock clock
	lim   *limitertest.Limiter
	// fail are what the next bookings answer, in turn, instead of the
	// bucket, and waits what the push client's next waits for a token (a
	// retry's) answer; answer is how long after its booking each is
	// answered (a slow store's write); events, if set, records each
	// booking among a lease's events.
	fail   []error
	waits  []error
	answer time.Duration
	// slow, by operation, is how long after it decided a call other than
	// Reserve answers; bookedAt is when each booking was asked.
	slow     map[string]time.Duration
	bookedAt []time.Time
	events   *eventLog
	push     *pusher
	queue    *fakeQueue
	work     *work
	d        *worker
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return rigOn(t, limitertest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
}

// rigOn is a rig on clock c: bubbleClock{} for one in a synctest bubble.
func rigOn(t *testing.T, c clock) *rig {
	t.Helper()
	r := &rig{t: t, clock: c, push: &pusher{}, queue: &fakeQueue{}, work: &work{clock: c}}
	r.lim = limitertest.New(limitertest.WithClock(c.Now), limitertest.WithSleep(c.Sleep), limitertest.WithFault(r.book),
		limitertest.WithLatency(func(op, _ string) time.Duration {
			if op != "Reserve" {
				return r.slow[op]
			}
			return r.answer
		}))
	r.d = &worker{&Dispatcher{Limiter: r.lim, Pusher: r.push, Queue: r.queue, Policy: DefaultPolicy,
		Now: c.Now, Sleep: c.Sleep, Can: Capabilities{KnownSilence: r.lim.KnownSilence}}, r.work, kRoute()}
	// Tests swap the rig's parts before its first job, which reads the
	// dispatcher's capabilities (Validate would read them now).
	if err := r.d.Policy.Validate(); err != nil {
		t.Fatal(err)
	}
	return r
}

// book is the rig's limiter asked for a call: a booking (a reservation, a
// take with the quota) is recorded among the events and answers the next
// of fail, if any; a wait, the next of waits.
func (r *rig) book(op, key string) error {
	var script *[]error
	switch op {
	case "Reserve":
		r.bookedAt = append(r.bookedAt, r.clock.Now())
		if r.events != nil {
			r.events.add("reserve")
		}
		script = &r.fail
	case "TakeWithQuota":
		if key == limiter.QuotaKey(kRoute().Bucket.Key) {
			return nil // the take's bucket answered for it
		}
		r.bookedAt = append(r.bookedAt, r.clock.Now())
		if r.events != nil {
			r.events.add("take")
		}
		script = &r.fail
	case "Wait":
		script = &r.waits
	default:
		return nil
	}
	if len(*script) == 0 {
		return nil
	}
	err := (*script)[0]
	*script = (*script)[1:]
	return err
}

// vendor has the rig push through the real push client, on the rig's
// limiter and clock, to a vendor that answers as answer does, at the URL
// of the rig's route if it has one route (set it first).
func (r *rig) vendor(answer func(otapushtest.Request) otapushtest.Answer) *otapushtest.Vendor {
	v := otapushtest.NewVendor(r.t, answer)
	r.d.Pusher = otapushtest.NewClient(r.t, r.lim, r.clock.Now, r.clock.Sleep)
	if route, ok := r.d.Routes.(fixedRoute); ok {
		route.URL = v.URL
		r.d.Routes = route
	}
	return v
}

// answering is a vendor's answer to every request: status.
func answering(status int) func(otapushtest.Request) otapushtest.Answer {
	return func(otapushtest.Request) otapushtest.Answer { return otapushtest.Answer{Status: status} }
}

// bookings is the tokens each booking the rig's limiter was asked for.
func (r *rig) bookings() []int {
	var n []int
	for _, c := range r.lim.Calls() {
		if c.Op == "Reserve" {
			n = append(n, c.N)
		}
	}
	return n
}

// bookAhead has the rig's bucket booked by others until next.
func (r *rig) bookAhead(next time.Time) {
	r.t.Helper()
	if err := r.lim.BookAhead(kRoute().Bucket, next); err != nil {
		r.t.Fatal(err)
	}
}

func testJob(now time.Time) job.Job {
	return job.Job{ID: "lane@tok", Channel: "bk", Credential: "c", Endpoint: "rates", FirstSeen: now}
}

func TestHandleJob(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *rig)
		check func(t *testing.T, r *rig, res Result)
	}{
		{"contention is retried at once, never deferred", func(r *rig) {
			r.fail = []error{fmt.Errorf("lost every race: %w", limiter.ErrContended), fmt.Errorf("again: %w", limiter.ErrContended)}
		}, func(t *testing.T, r *rig, res Result) {
			if res.Outcome != Pushed || len(r.queue.deferred) != 0 || len(r.bookings()) != 3 {
				t.Fatalf("result %+v after %d reservations and %d deferrals; want pushed after 3, none deferred", res, len(r.bookings()), len(r.queue.deferred))
			}
		}},
		{"a lane with more pending pushes again in the same call", func(r *rig) {
			r.work.more, r.work.linger = 2, 300*time.Millisecond
		}, func(t *testing.T, r *rig, res Result) {
			if res.Outcome != Pushed || res.Pushes != 3 || res.Items != 6 || len(r.push.bodies) != 3 {
				t.Fatalf("result %+v with %d pushes; want 3 pushes of 2 items", res, len(r.push.bodies))
			}
		}},
		{"past MaxHold the next job is deferred, its hold renewed", func(r *rig) {
			r.work.more, r.work.linger = 5, 900*time.Millisecond
			r.d.Policy.MaxHold = 1500 * time.Millisecond
		}, func(t *testing.T, r *rig, res Result) {
			if res.Outcome != Deferred || res.Pushes != 2 || len(r.queue.deferred) != 1 || r.work.holds != 1 {
				t.Fatalf("result %+v, deferrals %d, holds %d; want 2 pushes then one deferral after Hold", res, len(r.queue.deferred), r.work.holds)
			}
		}},
		{"a duplicate pushes nothing and wastes nothing", func(r *rig) {
			r.work.beginErr = ErrNothingToPush
		}, func(t *testing.T, r *rig, res Result) {
			if res.Outcome != Coalesced || res.WastedSlots != 0 || len(r.push.bodies) != 0 {
				t.Fatalf("result %+v; want coalesced, no push, no wasted slot", res)
			}
		}},
		{"work found idle before booking spends no slot", func(r *rig) {
			r.work.beginErr = ErrIdle
		}, func(t *testing.T, r *rig, res Result) {
			if res.Outcome != Coalesced || res.WastedSlots != 0 || len(r.bookings()) != 0 {
				t.Fatalf("result %+v after %d reservations; want coalesced, none booked, no wasted slot", res, len(r.bookings()))
			}
		}},
		{"a vendor refusal dead-letters the job and never settles the work", func(r *rig) {
			r.vendor(answering(http.StatusBadRequest))
		}, func(t *testing.T, r *rig, res Result) {
			if res.Outcome != DeadLettered || len(r.queue.dead) != 1 || r.work.done != 0 || res.WastedSlots != 0 {
				t.Fatalf("result %+v, dead %d, done %d; want the job dead-lettered, Done not called, no slot wasted", res, len(r.queue.dead), r.work.done)
			}
		}},
		{"a store that fails the read defers the job, fail closed", func(r *rig) {
			r.work.beginErr = errors.New("dynamodb down")
		}, func(t *testing.T, r *rig, res Result) {
			if res.Outcome != Deferred || !res.StoreError || r.queue.deferred[0].wait != DefaultPolicy.StoreCooldown {
				t.Fatalf("result %+v; want deferred by the store cooldown", res)
			}
		}},
		{"a malformed job is dead-lettered", func(r *rig) {
			r.work.beginErr = job.ErrMalformed
		}, func(t *testing.T, r *rig, res Result) {
			if res.Outcome != DeadLettered || len(r.queue.dead) != 1 {
				t.Fatalf("result %+v; want dead-lettered", res)
			}
		}},
		{"a recheck comes back at its time, holding no slot", func(r *rig) {
			r.work.beginErr = &RecheckError{At: r.clock.Now().Add(2 * time.Minute), Reason: "owned"}
		}, func(t *testing.T, r *rig, res Result) {
			if res.Outcome != Deferred || r.queue.deferred[0].wait != 2*time.Minute {
				t.Fatalf("result %+v, deferrals %+v; want one deferral of 2m", res, r.queue.deferred)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			tt.setup(r)
			res, err := r.d.HandleJob(context.Background(), testJob(r.clock.Now()))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r, res)
		})
	}
}

// A payload job the deferred queue delivers twice pushes once: the second
// copy finds the fence taken.
func TestFenceStopsASecondDelivery(t *testing.T) {
	r := newRig(t)
	r.d.Work, r.d.Fence = nil, limitertest.New(limitertest.WithClock(r.clock.Now)).FirstAfter
	j := testJob(r.clock.Now())
	j.Payload, j.Deferrals, j.Hold.At = []byte(`{"n":1}`), 1, r.clock.Now()
	first, err := r.d.HandleJob(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.d.HandleJob(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	if first.Outcome != Pushed || second.Outcome != Coalesced || len(r.push.bodies) != 1 {
		t.Fatalf("two deliveries: %s then %s, %d pushes; want pushed, coalesced, 1 push", first.Outcome, second.Outcome, len(r.push.bodies))
	}
}

// The fence names a job's try, not its slot: a retry after a failed push
// (or after a push the limiter store failed during) pushes again, while a
// copy of the delivery whose push failed stays fenced out.
func TestFenceLetsARetryThrough(t *testing.T) {
	tests := []struct {
		name  string
		waits []error // what the client's waits for a retry's token answer
		// requests: the vendor's, the failed push's and its retry's
		requests int
	}{
		{"vendor 503", nil, otapush.DefaultPolicy.MaxAttempts + 1},
		{"store unavailable", []error{storeDown()}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.d.Work, r.d.Fence = nil, limitertest.New(limitertest.WithClock(r.clock.Now)).FirstAfter
			var failing atomic.Bool
			failing.Store(true)
			v := r.vendor(func(otapushtest.Request) otapushtest.Answer {
				if failing.Load() {
					return otapushtest.Answer{Status: http.StatusServiceUnavailable}
				}
				return otapushtest.Answer{}
			})
			r.waits = tt.waits
			original := testJob(r.clock.Now())
			original.Payload = []byte(`{"n":1}`)
			if res, err := r.d.HandleJob(context.Background(), original); err != nil || res.Outcome != Deferred {
				t.Fatalf("failed push: %+v, %v; want deferred", res, err)
			}
			retry := r.queue.deferred[0].j
			failing.Store(false)
			_ = r.clock.Sleep(t.Context(), r.queue.deferred[0].wait)
			if res, err := r.d.HandleJob(context.Background(), retry); err != nil || res.Outcome != Pushed {
				t.Fatalf("retry: %+v, %v; want pushed", res, err)
			}
			if res, err := r.d.HandleJob(context.Background(), original); err != nil || res.Outcome != Coalesced {
				t.Fatalf("a second copy of the original delivery: %+v, %v; want coalesced", res, err)
			}
			if got := len(v.Received()); got != tt.requests {
				t.Errorf("the vendor received %d requests, want %d (the failed push's and its retry's)", got, tt.requests)
			}
		})
	}
}

// A push refused with 401/403 is tried again at once when the credential's
// token turns out to have been rotated. When it has not, the route's bucket
// pauses and the job waits out its backoff with its work, flagged for the
// alarm; past MaxFailures it is dead-lettered, its work never settled.
func TestRefusedCredentialIsRefreshedOnce(t *testing.T) {
	for _, tt := range []struct {
		rotated  bool
		failures int
	}{{true, 0}, {false, 0}, {false, 2}, {false, DefaultPolicy.MaxFailures}} {
		r := newRig(t)
		r.d.Can.Penalize = r.lim.Penalize
		r.vendor(answering(http.StatusUnauthorized))
		j := testJob(r.clock.Now())
		j.Failures = tt.failures
		task := r.d.task(j)
		task.Refresh = func() bool { return tt.rotated }
		res, err := r.d.Do(context.Background(), task, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		backoff := DefaultPolicy.FailureBackoff << tt.failures
		switch {
		case tt.rotated && (res.Outcome != Deferred || r.queue.deferred[0].wait != 0 || r.queue.deferred[0].j.Failures != 1):
			t.Errorf("rotated token: %+v, want deferred at once, counted as a failure", res)
		case !tt.rotated && tt.failures < DefaultPolicy.MaxFailures &&
			(res.Outcome != Deferred || !res.CredentialRefused || r.queue.deferred[0].wait != backoff ||
				!r.lim.KnownSilence(kRoute().Bucket).Equal(r.clock.Now().Add(backoff)) || r.work.done != 0):
			t.Errorf("same token after %d failures: %+v, paused until %v; want deferred %v with the bucket paused as long, flagged", tt.failures, res, r.lim.KnownSilence(kRoute().Bucket), backoff)
		case !tt.rotated && tt.failures >= DefaultPolicy.MaxFailures && (res.Outcome != DeadLettered || !res.CredentialRefused || r.work.done != 0):
			t.Errorf("same token after %d failures: %+v, done %d; want dead-lettered, flagged, the work not settled", tt.failures, res, r.work.done)
		}
	}
}

// A vendor that keeps failing is asked less and less often, and past
// MaxFailures the job is dead-lettered with the reason and its work is
// never settled as if delivered.
func TestFailingVendorBacksOffThenGivesUp(t *testing.T) {
	tests := []struct {
		failures int
		want     Outcome
		wait     time.Duration
	}{
		{0, Deferred, 2 * time.Second},
		{1, Deferred, 4 * time.Second},
		{3, Deferred, 16 * time.Second},
		{7, Deferred, 256 * time.Second},
		{8, DeadLettered, 0},
	}
	for _, tt := range tests {
		r := newRig(t)
		r.vendor(answering(http.StatusServiceUnavailable))
		j := testJob(r.clock.Now())
		j.Failures = tt.failures
		res, err := r.d.HandleJob(context.Background(), j)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != tt.want {
			t.Fatalf("after %d failures: %+v, want %s", tt.failures, res, tt.want)
		}
		switch tt.want {
		case Deferred:
			if d := r.queue.deferred[0]; d.wait != tt.wait || d.j.Failures != tt.failures+1 {
				t.Errorf("after %d failures: deferred %v with failures %d, want %v and %d", tt.failures, d.wait, d.j.Failures, tt.wait, tt.failures+1)
			}
		case DeadLettered:
			if len(r.queue.dead) != 1 || r.work.done != 0 {
				t.Errorf("after %d failures: dead %v, done %d; want the job dead-lettered and the work not settled", tt.failures, r.queue.dead, r.work.done)
			}
		}
	}
}

// A lane with a long backlog hands back a job after every push. Once the
// call's hold has ended, the next job goes to the queue, unbooked, on any
// route: on a shadow route (which never sleeps for its slot) and on a
// bucket whose slots come faster than its pushes (which never waits for
// one), nothing else ends the call, and a hot property's lane kept the
// adversary's invocation pushing into its function timeout (seed 10).
func TestLaneBacklogIsHandedOnAtTheCallsHold(t *testing.T) {
	tests := []struct {
		name   string
		shadow bool
		rate   float64 // the bucket's, of burst 1: its slots 1/rate apart
	}{
		{"shadow, bucket booked ahead", true, 0.5},
		{"enforce, slots faster than pushes", false, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.d.Routes = kRoute(func(r *Route) { r.Shadow, r.Bucket.Limit = tt.shadow, limiter.PerSecond(tt.rate, 1) })
			// The vendor answers each push 300 ms after it on the rig's
			// clock.
			v := r.vendor(func(otapushtest.Request) otapushtest.Answer {
				_ = r.clock.Sleep(context.Background(), 300*time.Millisecond)
				return otapushtest.Answer{}
			})
			r.work.more = 1000 // a backlog no push clears
			start := r.clock.Now()
			res, err := r.d.HandleJob(t.Context(), testJob(start))
			if err != nil {
				t.Fatal(err)
			}
			// Pushes begin at 0, 0.3 s, … 1.8 s (within MaxHold, 2 s);
			// the job handed back at 2.1 s is deferred.
			if len(v.Received()) != 7 || len(r.bookings()) != 7 {
				t.Fatalf("%d pushes and %d reservations in %v; want 7 of each, then the call's hold (%v) ends it",
					len(v.Received()), len(r.bookings()), r.clock.Now().Sub(start), DefaultPolicy.MaxHold)
			}
			if res.Outcome != Deferred || len(r.queue.deferred) != 1 {
				t.Fatalf("result %+v, deferrals %d; want the handed-back job deferred once", res, len(r.queue.deferred))
			}
			if d := r.queue.deferred[0]; d.j.Hold.Held() || d.wait != 0 || d.j.NotBefore.After(r.clock.Now()) {
				t.Fatalf("deferred %+v for %v; want it due now, with no slot booked for it", d.j, d.wait)
			}
		})
	}
}
