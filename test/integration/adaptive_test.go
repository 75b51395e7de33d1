package integration

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// An adaptive bucket's rate is learned by every worker from the answer of
// its next write: worker B, which never read the item, grants at the rate
// worker A lowered, at the cost of one failed condition, and the climb
// after the quiet period reaches both with no write at all.
func TestAdaptiveRatePropagatesThroughTheWriteAnswer(t *testing.T) {
	t.Parallel()
	f := newAdaptiveFleet(t, emulator.DynamoDB(t), "expedia#cred-1#rates", 4)
	clock, t0, b, at := f.clock, f.t0, f.b, f.at
	a, w := f.worker(t), f.worker(t)
	ctx := context.Background()
	take := func(wk worker) (limiter.Reservation, bool) {
		t.Helper()
		r, err := wk.Take(ctx, b, 1)
		if errors.Is(err, limiter.ErrExhausted) {
			return r, false
		}
		if err != nil {
			t.Fatalf("Take: %v", err)
		}
		return r, true
	}

	// Both workers know the bucket at the configured rate.
	rb, ok := take(w)
	if !ok || rb.Rate != 20 {
		t.Fatalf("B's first take: %+v, %v; want a grant at 20/s", rb, ok)
	}
	ra, ok := take(a)
	if !ok || ra.Rate != 20 {
		t.Fatalf("A's first take: %+v, %v; want a grant at 20/s", ra, ok)
	}

	// The vendor throttles A's request: the rate halves and the bucket is
	// empty at the new rate (tat = t0 + 4 × 100 ms), in one write.
	before := a.calls.Answered()
	if err := a.Throttle(ctx, b, stampOf(ra), t0); err != nil {
		t.Fatal(err)
	}
	if n := a.calls.Answered() - before; n != 1 {
		t.Fatalf("Throttle sent %d writes, want 1", n)
	}

	// B, 100 ms later, still thinks 20/s with the bucket nearly full. Its
	// write fails its version condition, the answer carries the new state,
	// and its second write grants the one token 10/s burst 4 leaves.
	at(100 * time.Millisecond)
	before = w.calls.Answered()
	rb2, ok := take(w)
	if !ok || math.Abs(rb2.Rate-10) > 1e-9 {
		t.Fatalf("B at +100ms: %+v, %v; want a grant at 10/s", rb2, ok)
	}
	if n := w.calls.Answered() - before; n != 2 {
		t.Fatalf("B's take sent %d writes, want 2 (one failed condition that taught it the rate, one grant)", n)
	}
	if _, ok := take(w); ok {
		t.Fatal("B got a second token at +100ms; 10/s burst 4 after the throttle leaves one")
	}
	if _, ok := take(a); ok {
		t.Fatal("A got a token at +100ms; B took the only one")
	}

	// From here the fleet grants 10/s: counted with the test's own loop.
	grants := []time.Time{t0.Add(100 * time.Millisecond)}
	for d := 110 * time.Millisecond; d <= 2100*time.Millisecond; d += 10 * time.Millisecond {
		at(d)
		for _, wk := range []worker{a, w} {
			for {
				r, ok := take(wk)
				if !ok {
					break
				}
				if math.Abs(r.Rate-10) > 1e-9 {
					t.Fatalf("grant at %v at rate %v, want 10/s", d, r.Rate)
				}
				grants = append(grants, clock.Now())
			}
		}
	}
	assertFleetInvariant(t, grants, limiter.PerSecond(10, 4), 0)
	// 2 s at 10/s, and the 3 tokens left of the burst refilled by +400ms.
	if len(grants) < 20 || len(grants) > 24 {
		t.Fatalf("%d grants from +100ms to +2.1s, want about 1 + 3 + 2 s × 10/s", len(grants))
	}

	// A throttle on B's request from before the change is the same overload
	// the change answered: the rate is left alone.
	if err := w.Throttle(ctx, b, stampOf(rb), clock.Now()); err != nil {
		t.Fatal(err)
	}
	st, err := w.State(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Adapt.Version != 1 || math.Abs(st.Rate-10) > 1e-9 {
		t.Fatalf("after a stale throttle: %+v, want version 1 at 10/s", st)
	}

	// After the quiet period (10 s) the rate climbs 1/s per second: 5 s into
	// the climb both workers grant at 15/s, with one write per grant.
	for i, wk := range []worker{a, w} {
		// 100 ms apart, so that each finds the bucket idle as its cache
		// says: the form switch a busy bucket costs is not what is counted.
		at(15*time.Second + time.Duration(i)*100*time.Millisecond)
		before := wk.calls.Answered()
		r, ok := take(wk)
		if want := 15 + 0.1*float64(i); !ok || math.Abs(r.Rate-want) > 0.01 {
			t.Fatalf("grant %v into the climb: %+v, %v; want one at %v/s", clock.Now().Sub(t0)-10*time.Second, r, ok, want)
		}
		if n := wk.calls.Answered() - before; n != 1 {
			t.Fatalf("a grant during the climb sent %d writes, want 1", n)
		}
	}

	// The vendor publishes 5/s: A lowers the rate for the fleet, and B
	// learns it from its next write.
	if err := a.Publish(ctx, b, 5); err != nil {
		t.Fatal(err)
	}
	at(17 * time.Second)
	r, ok := take(w)
	if !ok || math.Abs(r.Rate-5) > 1e-9 {
		t.Fatalf("B after a published 5/s: %+v, %v; want a grant at 5/s", r, ok)
	}
	// Publishing the same limit again changes nothing and costs no call.
	before = a.calls.Answered()
	if err := a.Publish(ctx, b, 5); err != nil {
		t.Fatal(err)
	}
	if n := a.calls.Answered() - before; n != 0 {
		t.Fatalf("publishing an unchanged limit sent %d writes", n)
	}
	// The vendor raises it to 8/s: the cap lifts in one write (one that
	// touches neither tat nor the TTL), and the rate climbs from 5/s at
	// once, 1/s per second: 2 s later B grants at 7/s.
	before = a.calls.Answered()
	if err := a.Publish(ctx, b, 8); err != nil {
		t.Fatalf("publishing a raised limit: %v", err)
	}
	if n := a.calls.Answered() - before; n != 1 {
		t.Fatalf("publishing a raised limit sent %d writes, want 1", n)
	}
	at(19 * time.Second)
	if r, ok := take(w); !ok || math.Abs(r.Rate-7) > 0.01 {
		t.Fatalf("B 2 s after a published raise to 8/s: %+v, %v; want a grant at 7/s", r, ok)
	}
}

// While the fleet probes above the rate that held, slots booked ahead at the
// probing rate are confirmed with one read before they are spent: once the
// throttle that ends the probe has landed, a worker that never saw it finds
// its slot revoked and books again at the rate that held, instead of
// earning a 429 of its own. Slots granted outside a probe cost no read.
func TestProbingSlotsAreRevokedByTheThrottleThatEndsTheProbe(t *testing.T) {
	t.Parallel()
	f := newAdaptiveFleet(t, emulator.DynamoDB(t), "booking_com#cred-1#rates", 2)
	clock, t0, b, at := f.clock, f.t0, f.b, f.at
	a, w := f.worker(t), f.worker(t)
	ctx := context.Background()
	reserve := func(wk worker, ahead time.Duration) limiter.Reservation {
		t.Helper()
		r, err := wk.Reserve(ctx, b, 1, ahead)
		if err != nil {
			t.Fatalf("Reserve at %v: %v", clock.Now().Sub(t0), err)
		}
		return r
	}
	confirm := func(wk worker, r limiter.Reservation) (bool, int64) {
		t.Helper()
		p, probing := r.Probe()
		if !probing {
			t.Fatalf("Confirm asked of a slot that is not probing: %+v", r)
		}
		before := wk.calls.Calls()
		ok, err := wk.Confirm(ctx, b, p)
		if err != nil {
			t.Fatal(err)
		}
		return ok, wk.calls.Calls() - before
	}

	// The configured rate is too high: a throttle halves it to 10/s.
	r0 := reserve(a, 0)
	if err := a.Throttle(ctx, b, stampOf(r0), t0); err != nil {
		t.Fatal(err)
	}
	// At 10/s nothing probes: a slot booked ahead needs no read.
	at(time.Second)
	held := reserve(w, time.Second)
	if held.Probing() {
		t.Fatalf("a slot at the rate that held (%v/s) is marked probing", held.Rate)
	}

	// 4 s into the climb (14/s) both workers book probing slots ahead.
	at(14 * time.Second)
	ra, rb := reserve(a, time.Second), reserve(w, time.Second)
	for _, r := range []limiter.Reservation{ra, rb} {
		if !r.Probing() || r.Rate < 13.9 || r.Rate > 14.1 {
			t.Fatalf("slot in the climb: %+v, probing %v; want a probing grant at about 14/s", r, r.Probing())
		}
	}
	// Nothing changed yet: B's slot stands, for one read.
	if ok, calls := confirm(w, rb); !ok || calls != 1 {
		t.Fatalf("Confirm before any throttle: %v after %d calls, want true after 1", ok, calls)
	}
	// A's probing request is throttled: the fleet returns to 10/s.
	if err := a.Throttle(ctx, b, stampOf(ra), clock.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// B never wrote since; its read finds the probe ended and the slot
	// revoked, and its next booking is at 10/s, after the penalty.
	if ok, calls := confirm(w, rb); ok || calls != 1 {
		t.Fatalf("Confirm after the throttle: %v after %d calls, want false after 1", ok, calls)
	}
	again := reserve(w, 5*time.Second)
	if again.Probing() || math.Abs(again.Rate-10) > 1e-9 || again.Slot.Before(clock.Now().Add(time.Second)) {
		t.Fatalf("booking after the revocation: %+v (probing %v), want a slot at 10/s after the penalty ends at %v",
			again, again.Probing(), clock.Now().Add(time.Second))
	}
}

// Wait confirms a probing slot when it comes: when the throttle that ends
// the probe lands while Wait sleeps, Wait books again at the rate that
// held, after the penalty, instead of returning the revoked slot.
func TestWaitBooksAgainWhenAThrottleRevokesItsProbingSlot(t *testing.T) {
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	ctx := context.Background()
	b := limiter.Bucket{Key: "booking_com#cred-1#rates", Limit: limiter.PerSecond(20, 2),
		Adaptive: &limiter.Adaptive{MinRate: 1, Quiet: 10 * time.Second, Increase: 1}}
	// Real time, shifted: the first throttle is placed 14 s back, so that
	// the bucket climbs (at about 14/s) while Wait really sleeps.
	var shift atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }
	a := newWorker(t, table, limiter.WithClock(now))
	granted := make(chan struct{})
	counter := &dynamotest.Counter{DB: &afterGrant{DB: emulator.DynamoDB(t), done: granted}}
	w, err := limiter.New(counter, limiter.WithTable(table), limiter.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}

	shift.Store(int64(-14 * time.Second))
	r0, err := a.Take(ctx, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Throttle(ctx, b, stampOf(r0), now()); err != nil {
		t.Fatal(err)
	}
	shift.Store(0)
	// A books nearly three seconds of the climb ahead: W's slot comes
	// after that, time enough for the throttle below to land first.
	var held limiter.Reservation
	for range 40 {
		if held, err = a.Reserve(ctx, b, 1, 5*time.Second); err != nil || !held.Probing() {
			t.Fatalf("booking the climb ahead: %+v (probing %v), %v", held, held.Probing(), err)
		}
	}

	type waited struct {
		r   limiter.Reservation
		err error
	}
	out := make(chan waited, 1)
	go func() {
		r, err := w.Wait(ctx, b, 1, 20*time.Second)
		out <- waited{r, err}
	}()
	// Once W holds its probing slot (nearly 3 s ahead), A's probing
	// request is throttled: back to 10/s, the bucket empty for 2 s.
	<-granted
	throttledAt := now()
	if err := a.Throttle(ctx, b, stampOf(held), throttledAt.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	got := <-out
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.r.Probing() || math.Abs(got.r.Rate-10) > 1e-9 || got.r.Slot.Before(throttledAt.Add(2*time.Second)) {
		t.Fatalf("Wait returned %+v (probing %v); want a slot at 10/s after the penalty ending %v",
			got.r, got.r.Probing(), throttledAt.Add(2*time.Second))
	}
	// The confirmation of its probing slot, SilenceAfter before it, and
	// the silence check of the slot it booked again if that lies
	// SilenceAfter or more ahead (a 429 could land in between); booked
	// after the penalty has ended, it is spent at once, unread.
	if reads := counter.Calls() - counter.Updates(); reads < 1 || reads > 2 {
		t.Fatalf("Wait read the bucket %d times, want 1 or 2 (the confirmation of its probing slot, the silence of a slot booked again ahead)", reads)
	}
}

// afterGrant forwards to DB and closes done after the first write that
// succeeds: a grant.
type afterGrant struct {
	DB   limiter.DynamoDBAPI
	done chan struct{}
	once sync.Once
}

func (g *afterGrant) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := g.DB.UpdateItem(ctx, in, opts...)
	if err == nil {
		g.once.Do(func() { close(g.done) })
	}
	return out, err
}

func (g *afterGrant) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return g.DB.GetItem(ctx, in, opts...)
}
