package dispatch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// gate is a scripted LeaseGate: it grants, or fails with err, and records
// what it was asked and what was released, in order with the pushes.
type gate struct {
	err      error
	asked    []limiter.InFlight
	maxWaits []time.Duration
	released []limiter.Lease
	events   *[]string
	expires  time.Time
	// contended is what Contended says: a lease of the key is waited for.
	contended bool
}

func (g *gate) Wait(_ context.Context, f limiter.InFlight, maxWait time.Duration) (limiter.Lease, error) {
	g.asked, g.maxWaits = append(g.asked, f), append(g.maxWaits, maxWait)
	if g.err != nil {
		return limiter.Lease{}, g.err
	}
	*g.events = append(*g.events, "acquire")
	return limiter.Lease{Key: f.Key, Slot: 0, Owner: "me", Expires: g.expires}, nil
}

func (g *gate) Contended(string) bool { return g.contended }

func (g *gate) Release(_ context.Context, l limiter.Lease) error {
	g.released = append(g.released, l)
	*g.events = append(*g.events, "release")
	return nil
}

// leasePusher records the order of events and each push's deadline.
type leasePusher struct {
	events    *[]string
	deadlines []time.Time
	reserved  []bool // whether each request went on its held slot
}

func (p *leasePusher) Push(ctx context.Context, req otapush.Request) (otapush.Response, error) {
	*p.events = append(*p.events, "push")
	p.reserved = append(p.reserved, req.Reserved)
	d, _ := ctx.Deadline()
	p.deadlines = append(p.deadlines, d)
	return otapush.Response{Attempts: 1}, nil
}

type leaseRouter struct{ f *limiter.InFlight }

func (r leaseRouter) Route(job.Job) (Route, error) {
	return Route{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(4, 8)}, URL: "http://ota.invalid", InFlight: r.f}, nil
}

func TestLeaseAroundThePush(t *testing.T) {
	f := &limiter.InFlight{Key: "k", Max: 3, Hold: 25 * time.Second}
	expires := time.Date(2026, 12, 1, 12, 0, 25, 0, time.UTC)
	tests := []struct {
		name    string
		f       *limiter.InFlight
		gateErr error
		noGate  bool
		check   func(t *testing.T, res Result, g *gate, p *leasePusher, q *fakeQueue, events []string)
	}{
		{"no max_in_flight: no lease", nil, nil, false, func(t *testing.T, res Result, g *gate, p *leasePusher, q *fakeQueue, events []string) {
			if res.Outcome != Pushed || len(g.asked) != 0 || strings.Join(events, ",") != "push" {
				t.Fatalf("result %+v, events %v, gate asked %d times; want a push and no lease", res, events, len(g.asked))
			}
		}},
		{"a free lease: token, lease, push, release", f, nil, false, func(t *testing.T, res Result, g *gate, p *leasePusher, q *fakeQueue, events []string) {
			if res.Outcome != Pushed || strings.Join(events, ",") != "acquire,push,release" {
				t.Fatalf("result %+v, events %v; want acquire, push, release", res, events)
			}
			if !p.deadlines[0].Equal(expires) {
				t.Fatalf("the push ran until %v, want its lease's expiry %v", p.deadlines[0], expires)
			}
			if g.maxWaits[0] != DefaultPolicy.MaxHold {
				t.Fatalf("the push waited up to %v for a lease, want the call's hold %v", g.maxWaits[0], DefaultPolicy.MaxHold)
			}
		}},
		{"no lease within the hold: deferred to the earliest expiry, slot kept", f,
			&limiter.LeaseBusyError{Key: "k", Max: 3, Held: 3, RetryAfter: 7 * time.Second}, false,
			func(t *testing.T, res Result, g *gate, p *leasePusher, q *fakeQueue, events []string) {
				if res.Outcome != Deferred || len(q.deferred) != 1 || q.deferred[0].wait != 7*time.Second || len(events) != 0 {
					t.Fatalf("result %+v, deferrals %+v, events %v; want deferred 7s, no push", res, q.deferred, events)
				}
				if !q.deferred[0].j.Hold.Held() || !strings.Contains(res.Reason, "3 of 3 in-flight leases held") {
					t.Fatalf("deferred job %+v (%q): want its slot kept and the reason", q.deferred[0].j, res.Reason)
				}
			}},
		{"the lease store down: fail closed", f, fmt.Errorf("boom: %w", limiter.ErrUnavailable), false,
			func(t *testing.T, res Result, g *gate, p *leasePusher, q *fakeQueue, events []string) {
				if res.Outcome != Deferred || !res.StoreError || q.deferred[0].wait != DefaultPolicy.StoreCooldown || len(events) != 0 {
					t.Fatalf("result %+v, deferrals %+v; want deferred for the store cooldown, no push", res, q.deferred)
				}
			}},
		{"a route with max_in_flight and no Leases: dead-lettered, never pushed unbounded", f, nil, true,
			func(t *testing.T, res Result, g *gate, p *leasePusher, q *fakeQueue, events []string) {
				if res.Outcome != DeadLettered || len(events) != 0 || !strings.Contains(q.dead[0], "Dispatcher.Leases") {
					t.Fatalf("result %+v, dead %v; want dead-lettered naming Dispatcher.Leases", res, q.dead)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			var events []string
			g := &gate{err: tt.gateErr, events: &events, expires: expires}
			p := &leasePusher{events: &events}
			r.d.Routes, r.d.Pusher = leaseRouter{tt.f}, p
			if !tt.noGate {
				r.d.Leases = NewLeases(g)
			}
			res, err := r.d.HandleJob(context.Background(), testJob(r.clock.Now()))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, res, g, p, r.queue, events)
		})
	}
}

// A vendor's published concurrency lowers the bound, and a later one
// raises it back up to the configuration, never above it.
func TestPublishedConcurrencyLowersMaxInFlight(t *testing.T) {
	l := NewLeases(&gate{})
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
		t.Run(tt.wait.String(), func(t *testing.T) {
			r := newRig(t)
			var events []string
			g := &gate{events: &events, expires: r.clock.Now().Add(time.Minute)}
			waiting := &waitingGate{gate: g, clock: r.clock, wait: tt.wait}
			p := &leasePusher{events: &events}
			r.d.Routes, r.d.Pusher, r.d.Leases = leaseRouter{&limiter.InFlight{Key: "k", Max: 1, Hold: time.Minute}}, p, NewLeases(waiting)
			start := r.clock.Now()
			res, err := r.d.HandleJob(context.Background(), testJob(start))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != Pushed || res.WastedSlots != tt.wasted || r.lim.calls != 1 || !res.Slot.Equal(start) || r.clock.Now().Sub(start) != tt.wait {
				t.Fatalf("result %+v after %d reservations, %v later; want pushed after the %v lease wait, %d wasted",
					res, r.lim.calls, r.clock.Now().Sub(start), tt.wait, tt.wasted)
			}
			if p.reserved[0] != tt.reserved {
				t.Fatalf("the request went on its held slot: %v; want %v", p.reserved[0], tt.reserved)
			}
		})
	}
}

// waitingGate grants after the clock moved by wait (a release of another
// push of the process).
type waitingGate struct {
	*gate
	clock *clock
	wait  time.Duration
}

func (w *waitingGate) Wait(ctx context.Context, f limiter.InFlight, maxWait time.Duration) (limiter.Lease, error) {
	if w.wait > maxWait {
		return limiter.Lease{}, &limiter.LeaseBusyError{Key: f.Key, Max: f.Max, Held: f.Max, RetryAfter: w.wait}
	}
	_ = w.clock.Sleep(ctx, w.wait)
	return w.gate.Wait(ctx, f, maxWait)
}

// settlingWork records when the work settles a push, among the lease's
// events, and whether the context it settles on is still live.
type settlingWork struct {
	*work
	events   *[]string
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
	*w.events = append(*w.events, "done")
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
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			var events []string
			g := &gate{events: &events, expires: r.clock.Now().Add(time.Minute)}
			w := &settlingWork{work: &work{clock: r.clock}, events: &events, messages: tt.messages}
			r.d.Routes, r.d.Pusher, r.d.Leases, r.d.Work = leaseRouter{&limiter.InFlight{Key: "k", Max: 1, Hold: time.Minute}}, &leasePusher{events: &events}, NewLeases(g), w
			res, err := r.d.HandleJob(context.Background(), testJob(r.clock.Now()))
			if err != nil || res.Outcome != Pushed {
				t.Fatalf("result %+v, %v; want pushed", res, err)
			}
			if got := strings.Join(events, ","); got != tt.want || len(g.released) != 1 {
				t.Fatalf("events %s, %d releases; want %s and one release", got, len(g.released), tt.want)
			}
			if w.ctxErr != nil {
				t.Fatalf("the push settled on a context that had ended: %v", w.ctxErr)
			}
		})
	}
}
