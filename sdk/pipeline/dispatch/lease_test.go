package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// leaseRig is a rig whose in-flight leases go through a real
// limiter.LeaseGate over limitertest's leases, in a synctest bubble (the
// gate waits on timers); the store's lease calls are recorded among the
// push's events (acquire, handover, release).
type leaseRig struct {
	*rig
	store *limitertest.Limiter
	gate  *limiter.LeaseGate
	ev    *eventLog
}

// eventLog is a push's events in order; fail, by store call, is what the
// call answers instead.
type eventLog struct {
	mu     sync.Mutex
	events []string
	fail   map[string]error
}

func (e *eventLog) add(event string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, event)
}

func (e *eventLog) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.events, ",")
}

func (e *eventLog) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = nil
}

// leaseCalls names the store's lease calls among the events.
var leaseCalls = map[string]string{"AcquireLease": "acquire", "HandOverLease": "handover", "ReleaseLease": "release"}

// newLeaseRig is a leaseRig; call it inside synctest.Test.
func newLeaseRig(t *testing.T) *leaseRig {
	t.Helper()
	r := rigOn(t, bubbleClock{})
	ev := &eventLog{fail: map[string]error{}}
	store := limitertest.New(limitertest.WithClock(r.clock.Now), limitertest.WithFault(func(op, _ string) error {
		if e, ok := leaseCalls[op]; ok {
			ev.add(e)
		}
		ev.mu.Lock()
		defer ev.mu.Unlock()
		return ev.fail[op]
	}))
	gate := limiter.NewLeaseGate(store)
	r.d.Leases = NewLeases(gate)
	return &leaseRig{rig: r, store: store, gate: gate, ev: ev}
}

// holdFor has another push of this process hold one of f's leases, and
// give it back after d (to the first push waiting for one, if any).
func (r *leaseRig) holdFor(t *testing.T, f limiter.InFlight, d time.Duration) {
	t.Helper()
	l, err := r.gate.Wait(t.Context(), f, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(d)
		_ = r.gate.Release(context.Background(), l)
	}()
}

// heldElsewhere has another process take n of f's leases now.
func (r *leaseRig) heldElsewhere(t *testing.T, f limiter.InFlight, n int) (*limiter.LeaseGate, []limiter.Lease) {
	t.Helper()
	other := limiter.NewLeaseGate(r.store)
	var held []limiter.Lease
	for range n {
		l, err := other.Wait(t.Context(), f, 0)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	return other, held
}

// toldBusy has this process ask for one of f's leases, all held, and be
// told when one frees: its gate knows the set contended until then.
func (r *leaseRig) toldBusy(t *testing.T, f limiter.InFlight) {
	t.Helper()
	var busy *limiter.LeaseBusyError
	if _, err := r.gate.Wait(t.Context(), f, time.Nanosecond); !errors.As(err, &busy) {
		t.Fatalf("asking for a lease of a full set: %v, want a *LeaseBusyError", err)
	}
}

// toldBusyFor has this process told that none of f's leases frees for
// left, after which another process gives back the one it held, which
// this process does not hear of: the set is free, and known contended.
func (r *leaseRig) toldBusyFor(t *testing.T, f limiter.InFlight, left time.Duration) {
	t.Helper()
	other, held := r.heldElsewhere(t, f, f.Max)
	time.Sleep(f.Hold - left)
	r.toldBusy(t, f)
	for _, l := range held {
		if err := other.Release(t.Context(), l); err != nil {
			t.Fatal(err)
		}
	}
}

// leasesLeft is how many of key's leases are still live.
func (r *leaseRig) leasesLeft(t *testing.T, key string) int {
	t.Helper()
	live, err := r.store.Leases(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return len(live)
}

// leasePusher records the order of events and each push's deadline.
type leasePusher struct {
	events    *eventLog
	deadlines []time.Time
	reserved  []bool // whether each request went on its held slot
}

func (p *leasePusher) Push(ctx context.Context, req otapush.Request) (otapush.Response, error) {
	p.events.add("push")
	p.reserved = append(p.reserved, req.Reserved)
	d, _ := ctx.Deadline()
	p.deadlines = append(p.deadlines, d)
	return otapush.Response{Attempts: 1}, nil
}

// leaseRoute routes every job to one bucket of 4/s, burst 8, under the
// lease set f.
func leaseRoute(f *limiter.InFlight) fixedRoute {
	return fixedRoute{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(4, 8)}, URL: "http://ota.invalid", InFlight: f}
}

func TestLeaseAroundThePush(t *testing.T) {
	f := &limiter.InFlight{Key: "k", Max: 3, Hold: 25 * time.Second}
	tests := []struct {
		name  string
		f     *limiter.InFlight
		setup func(t *testing.T, r *leaseRig)
		check func(t *testing.T, res Result, r *leaseRig, p *leasePusher, start time.Time)
	}{
		{"no max_in_flight: no lease", nil, nil, func(t *testing.T, res Result, r *leaseRig, p *leasePusher, start time.Time) {
			if res.Outcome != Pushed || r.ev.String() != "push" {
				t.Fatalf("result %+v, events %v; want a push and no lease", res, r.ev)
			}
		}},
		{"a free lease: token, lease, push, release", f, nil, func(t *testing.T, res Result, r *leaseRig, p *leasePusher, start time.Time) {
			if res.Outcome != Pushed || r.ev.String() != "acquire,push,release" {
				t.Fatalf("result %+v, events %v; want acquire, push, release", res, r.ev)
			}
			if want := start.Add(f.Hold); !p.deadlines[0].Equal(want) {
				t.Fatalf("the push ran until %v, want its lease's expiry %v", p.deadlines[0], want)
			}
		}},
		{"no lease within the hold: deferred to the earliest expiry, slot kept", f,
			func(t *testing.T, r *leaseRig) {
				// Another process took all three 18 s ago: the first
				// expires in 7 s.
				r.heldElsewhere(t, *f, 3)
				time.Sleep(18 * time.Second)
			},
			func(t *testing.T, res Result, r *leaseRig, p *leasePusher, start time.Time) {
				// One ask as the wait begins, one as it ends (the store's
				// answer of then: still none, the first free at 7 s from
				// the start), so the job comes back at the expiry.
				q := r.queue
				want := 7*time.Second - DefaultPolicy.MaxHold
				if res.Outcome != Deferred || len(q.deferred) != 1 || q.deferred[0].wait != want || r.ev.String() != "acquire,acquire" {
					t.Fatalf("result %+v, deferrals %+v, events %v; want two asks, deferred %v, no push", res, q.deferred, r.ev, want)
				}
				if !q.deferred[0].j.Hold.Held() || !strings.Contains(res.Reason, "3 of 3 in-flight leases held") {
					t.Fatalf("deferred job %+v (%q): want its slot kept and the reason", q.deferred[0].j, res.Reason)
				}
				if waited := r.clock.Now().Sub(start); waited != DefaultPolicy.MaxHold {
					t.Fatalf("the push waited %v for a lease, want the call's hold %v", waited, DefaultPolicy.MaxHold)
				}
			}},
		{"the lease store down: fail closed", f,
			func(t *testing.T, r *leaseRig) {
				r.ev.fail["AcquireLease"] = fmt.Errorf("boom: %w", limiter.ErrUnavailable)
			},
			func(t *testing.T, res Result, r *leaseRig, p *leasePusher, start time.Time) {
				q := r.queue
				if res.Outcome != Deferred || !res.StoreError || q.deferred[0].wait != DefaultPolicy.StoreCooldown || r.ev.String() != "acquire" {
					t.Fatalf("result %+v, deferrals %+v, events %v; want deferred for the store cooldown, no push", res, q.deferred, r.ev)
				}
			}},
		{"a route with max_in_flight and no Leases: dead-lettered, never pushed unbounded", f,
			func(t *testing.T, r *leaseRig) { r.d.Leases = nil },
			func(t *testing.T, res Result, r *leaseRig, p *leasePusher, start time.Time) {
				if res.Outcome != DeadLettered || r.ev.String() != "" || !strings.Contains(r.queue.dead[0], "Dispatcher.Leases") {
					t.Fatalf("result %+v, dead %v; want dead-lettered naming Dispatcher.Leases", res, r.queue.dead)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, synctestRun(func(t *testing.T) {
			r := newLeaseRig(t)
			if tt.setup != nil {
				tt.setup(t, r)
			}
			r.ev.reset()
			p := &leasePusher{events: r.ev}
			r.d.Routes, r.d.Pusher = leaseRoute(tt.f), p
			start := r.clock.Now()
			res, err := r.d.HandleJob(context.Background(), testJob(start))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, res, r, p, start)
		}))
	}
}

// A vendor's published concurrency lowers the bound, and a later one
// raises it back up to the configuration, never above it.
func TestPublishedConcurrencyLowersMaxInFlight(t *testing.T) {
	l := NewLeases(limiter.NewLeaseGate(limitertest.New()))
	f := limiter.InFlight{Key: "bk#c#rates", Max: 3, Hold: time.Minute}
	steps := []struct {
		key  string
		n    int
		want int
	}{
		{"", 0, 3},
		{"bk#c#rates", 2, 2},
		{"bk#c#rates", 5, 3},                      // above the config: the config's
		{"bk#c#rates", 0, 3},                      // nonsense is ignored
		{limiter.ShardKey("bk#c#rates", 1), 1, 1}, // a shard's answer is its bucket's
		{"bk#c#other", 1, 1},                      // another key's is not this one's
	}
	for i, s := range steps {
		if s.key != "" {
			l.Publish(s.key, s.n)
		}
		if got := l.Effective(f).Max; got != s.want {
			t.Fatalf("step %d: after publishing %d for %q, max %d; want %d", i, s.n, s.key, got, s.want)
		}
	}
}

// The lease waits no longer than the call may hold the job: its hold, and
// DeadlineMargin before the invocation's end.
func TestLeaseWaitsWithinTheHold(t *testing.T) {
	r := newRig(t)
	now := r.clock.Now()
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(4*time.Second))
	defer cancel()
	if got := r.d.holdLeft(ctx, &task{hold: now.Add(10 * time.Second)}); got != time.Second {
		t.Fatalf("holdLeft = %v, want 1s (deadline 4s less the 3s margin)", got)
	}
	if got := r.d.holdLeft(context.Background(), &task{hold: now.Add(1500 * time.Millisecond)}); got != 1500*time.Millisecond {
		t.Fatalf("holdLeft = %v, want the hold's 1.5s", got)
	}
	if got := r.d.holdLeft(context.Background(), &task{hold: now.Add(-time.Second)}); got != 0 {
		t.Fatalf("holdLeft = %v past the hold, want 0", got)
	}
}

// A lease awaited within the slot's grace costs the push nothing it
// booked: the slot is used, late, and counted as no waste. A lease
// awaited past the grace (875 ms here: half the burst's refill) leaves
// the slot unused: the request books a fresh token, since the vendor's
// window would count it beside the slots granted while it waited.
func TestLeaseAwaitedWithinTheHoldKeepsTheToken(t *testing.T) {
	tests := []struct {
		wait     time.Duration
		reserved bool
		wasted   int
	}{
		{500 * time.Millisecond, true, 0},
		{1500 * time.Millisecond, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.wait.String(), synctestRun(func(t *testing.T) {
			r := newLeaseRig(t)
			f := limiter.InFlight{Key: "k", Max: 1, Hold: time.Minute}
			// Another push of the process holds the lease, and hands
			// it over after tt.wait.
			r.holdFor(t, f, tt.wait)
			p := &leasePusher{events: r.ev}
			r.d.Routes, r.d.Pusher = leaseRoute(&f), p
			start := r.clock.Now()
			res, err := r.d.HandleJob(context.Background(), testJob(start))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != Pushed || res.WastedSlots != tt.wasted || len(r.bookings()) != 1 || !res.Slot.Equal(start) || r.clock.Now().Sub(start) != tt.wait {
				t.Fatalf("result %+v after %d reservations, %v later; want pushed after the %v lease wait, %d wasted",
					res, len(r.bookings()), r.clock.Now().Sub(start), tt.wait, tt.wasted)
			}
			if p.reserved[0] != tt.reserved {
				t.Fatalf("the request went on its held slot: %v; want %v", p.reserved[0], tt.reserved)
			}
		}))
	}
}

// settlingWork records when the work settles a push, among the lease's
// events, and whether the context it settles on is still live.
type settlingWork struct {
	*work
	events   *eventLog
	messages bool
	ctxErr   error
}

func (w *settlingWork) Begin(ctx context.Context, j job.Job) (job.Job, Payload, error) {
	if w.messages {
		return j, Payload{Messages: []Message{{Body: []byte("a"), Items: 1}, {Body: []byte("b"), Items: 1}}, Items: 2}, nil
	}
	return w.work.Begin(ctx, j)
}

func (w *settlingWork) Done(ctx context.Context, j job.Job, p Payload) (*job.Job, error) {
	w.events.add("done")
	w.ctxErr = ctx.Err()
	return w.work.Done(ctx, j, p)
}

// The vendor's concurrency is held for its request only: the lease is
// released before the work settles the push (a store write, which may
// wait for the lane's siblings), and the settling runs on a live context.
func TestInFlightLeaseIsFreedBeforeThePushSettles(t *testing.T) {
	tests := []struct {
		name     string
		messages bool
		want     string
	}{
		{"one body", false, "acquire,push,release,done"},
		{"messages", true, "acquire,push,push,release,done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, synctestRun(func(t *testing.T) {
			r := newLeaseRig(t)
			w := &settlingWork{work: &work{clock: r.clock}, events: r.ev, messages: tt.messages}
			r.d.Routes, r.d.Pusher, r.d.Work = leaseRoute(&limiter.InFlight{Key: "k", Max: 1, Hold: time.Minute}), &leasePusher{events: r.ev}, w
			res, err := r.d.HandleJob(context.Background(), testJob(r.clock.Now()))
			if err != nil || res.Outcome != Pushed {
				t.Fatalf("result %+v, %v; want pushed", res, err)
			}
			if got := r.ev.String(); got != tt.want || r.leasesLeft(t, "k") != 0 {
				t.Fatalf("events %s, %d leases left; want %s and none", got, r.leasesLeft(t, "k"), tt.want)
			}
			if w.ctxErr != nil {
				t.Fatalf("the push settled on a context that had ended: %v", w.ctxErr)
			}
		}))
	}
}

// synctestRun runs f in a synctest bubble, as t.Run's function.
func synctestRun(f func(t *testing.T)) func(t *testing.T) {
	return func(t *testing.T) { synctest.Test(t, f) }
}
