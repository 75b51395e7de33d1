package limitertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// A push client takes it where it takes the real limiter.
var (
	_ otapush.Limiter     = (*Limiter)(nil)
	_ otapush.MultiWaiter = (*Limiter)(nil)
	_ limiter.LeaseStore  = (*Limiter)(nil)
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// step is one call at t0+at and what the documentation says it answers:
// a slot at t0+slot, or a denial with RetryAfter wait, or an error
// matching err.
type step struct {
	at   time.Duration
	call func(ctx context.Context, l *Limiter) (slot time.Time, err error)
	slot time.Duration // granted at t0+slot
	wait time.Duration // denied, RetryAfter
	err  error         // errors.Is(err, …) for other refusals
}

// ten is rate 10/s (T = 100ms), burst 5.
var ten = limiter.Bucket{Key: "cm#cred#rates", Limit: limiter.PerSecond(10, 5)}

func take(b limiter.Bucket, n int) func(context.Context, *Limiter) (time.Time, error) {
	return func(ctx context.Context, l *Limiter) (time.Time, error) {
		r, err := l.Take(ctx, b, n)
		return r.Slot, err
	}
}

func reserve(b limiter.Bucket, n int, maxDelay time.Duration) func(context.Context, *Limiter) (time.Time, error) {
	return func(ctx context.Context, l *Limiter) (time.Time, error) {
		r, err := l.Reserve(ctx, b, n, maxDelay)
		return r.Slot, err
	}
}

func reserveAhead(b limiter.Bucket, n int, maxDelay, ahead time.Duration) func(context.Context, *Limiter) (time.Time, error) {
	return func(ctx context.Context, l *Limiter) (time.Time, error) {
		r, err := l.ReserveAhead(ctx, b, n, maxDelay, ahead)
		return r.Slot, err
	}
}

func penalize(b limiter.Bucket, until time.Duration) func(context.Context, *Limiter) (time.Time, error) {
	return func(ctx context.Context, l *Limiter) (time.Time, error) {
		return time.Time{}, l.Penalize(ctx, b, t0.Add(until))
	}
}

func reset(b limiter.Bucket) func(context.Context, *Limiter) (time.Time, error) {
	return func(ctx context.Context, l *Limiter) (time.Time, error) { return time.Time{}, l.Reset(ctx, b) }
}

// The behaviour the limiter documents (package limiter, docs/design.md),
// step by step on one bucket.
func TestDocumentedBehaviour(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"a full bucket grants its burst at once, then one token per interval", []step{
			{at: 0, call: take(ten, 5), slot: 0},
			{at: 0, call: take(ten, 1), wait: 100 * time.Millisecond},
			{at: 100 * time.Millisecond, call: take(ten, 1), slot: 100 * time.Millisecond},
			{at: 100 * time.Millisecond, call: take(ten, 2), wait: 200 * time.Millisecond},
		}},
		{"n over the burst can never be granted", []step{
			{at: 0, call: take(ten, 6), err: limiter.ErrNeverGrantable},
			{at: 0, call: reserve(ten, 8, 200*time.Millisecond), err: limiter.ErrNeverGrantable},
			{at: 0, call: reserve(ten, 7, 200*time.Millisecond), slot: 200 * time.Millisecond},
		}},
		{"a reservation books the earliest slot within its max delay", []step{
			{at: 0, call: take(ten, 5), slot: 0},
			{at: 0, call: reserve(ten, 1, time.Second), slot: 100 * time.Millisecond},
			{at: 0, call: reserve(ten, 1, time.Second), slot: 200 * time.Millisecond},
			{at: 0, call: reserve(ten, 1, 250*time.Millisecond), wait: 50 * time.Millisecond},
		}},
		{"a reservation ahead decides at the now it claims, at most its max delay ahead", []step{
			{at: 0, call: reserveAhead(ten, 1, time.Second, 150*time.Millisecond), slot: 150 * time.Millisecond},
			{at: 0, call: reserveAhead(ten, 1, 100*time.Millisecond, 150*time.Millisecond), slot: 100 * time.Millisecond},
		}},
		{"a penalty empties the bucket until its end, and it refills gradually after", []step{
			{at: 0, call: penalize(ten, 2*time.Second)},
			{at: time.Second, call: take(ten, 1), wait: time.Second + 100*time.Millisecond},
			{at: 2*time.Second + 100*time.Millisecond, call: take(ten, 1), slot: 2*time.Second + 100*time.Millisecond},
			{at: 2*time.Second + 100*time.Millisecond, call: take(ten, 1), wait: 100 * time.Millisecond},
		}},
		{"a penalty shorter than what is booked leaves the bucket alone", []step{
			{at: 0, call: take(ten, 5), slot: 0},
			{at: 0, call: reserve(ten, 5, time.Second), slot: 500 * time.Millisecond},
			{at: 0, call: penalize(ten, -100*time.Millisecond)},
			{at: 0, call: reserve(ten, 1, time.Second), slot: 600 * time.Millisecond},
		}},
		{"a penalty more than MaxPenalty ahead is refused", []step{
			{at: 0, call: penalize(ten, limiter.MaxPenalty+time.Second), err: limiter.ErrInvalidArgument},
		}},
		{"reset drops a penalty: an idle bucket is full at once", []step{
			{at: 0, call: penalize(ten, time.Minute)},
			{at: time.Second, call: take(ten, 1), wait: time.Minute - time.Second + 100*time.Millisecond},
			{at: time.Second, call: reset(ten)},
			{at: time.Second, call: take(ten, 5), slot: time.Second},
		}},
		{"reset keeps the slots already booked", []step{
			{at: 0, call: take(ten, 5), slot: 0},
			{at: 0, call: reserve(ten, 5, time.Second), slot: 500 * time.Millisecond},
			{at: 0, call: penalize(ten, time.Minute)},
			{at: 0, call: reset(ten)},
			{at: 0, call: reserve(ten, 1, time.Second), slot: 600 * time.Millisecond},
		}},
		{"a margin keeps rate·margin of the burst free, not the rate", []step{
			{at: 0, call: take(withMargin(ten, 150*time.Millisecond), 3), slot: 0},
			{at: 0, call: take(withMargin(ten, 150*time.Millisecond), 1), wait: 50 * time.Millisecond},
			{at: 0, call: take(withMargin(ten, 150*time.Millisecond), 4), err: limiter.ErrNeverGrantable},
			{at: 50 * time.Millisecond, call: take(withMargin(ten, 150*time.Millisecond), 1), slot: 50 * time.Millisecond},
			{at: 150 * time.Millisecond, call: take(withMargin(ten, 150*time.Millisecond), 1), slot: 150 * time.Millisecond},
		}},
		{"buckets are apart", []step{
			{at: 0, call: take(ten, 5), slot: 0},
			{at: 0, call: take(limiter.Bucket{Key: "cm#cred#availability", Limit: ten.Limit}, 5), slot: 0},
		}},
		{"an invalid bucket names the field", []step{
			{at: 0, call: take(limiter.Bucket{Key: "", Limit: ten.Limit}, 1), err: limiter.ErrInvalidArgument},
			{at: 0, call: take(limiter.Bucket{Key: "k", Limit: limiter.Limit{Rate: 0, Burst: 1}}, 1), err: limiter.ErrInvalidArgument},
			{at: 0, call: take(ten, 0), err: limiter.ErrInvalidArgument},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { play(t, tt.steps) })
	}
}

// play runs steps, in order, on a new limiter whose clock starts at t0
// and moves to each step's time.
func play(t *testing.T, steps []step) {
	t.Helper()
	clock := NewClock(t0)
	l := New(WithClock(clock.Now))
	for i, s := range steps {
		clock.Advance(t0.Add(s.at).Sub(clock.Now()))
		slot, err := s.call(t.Context(), l)
		check(t, i, s, slot, err)
	}
}

func withMargin(b limiter.Bucket, m time.Duration) limiter.Bucket {
	b.Limit.Margin = m
	return b
}

func check(t *testing.T, i int, s step, slot time.Time, err error) {
	t.Helper()
	switch wait, denied := limiter.RetryAfter(err); {
	case s.err != nil:
		if !errors.Is(err, s.err) {
			t.Fatalf("step %d: err %v, want %v", i, err, s.err)
		}
	case s.wait != 0:
		if !denied || wait != s.wait || !errors.Is(err, limiter.ErrExhausted) {
			t.Fatalf("step %d: (%v, %v), want a denial with RetryAfter %v", i, slot, err, s.wait)
		}
	case err != nil:
		t.Fatalf("step %d: %v, want granted", i, err)
	case !slot.IsZero() || s.slot != 0:
		if want := t0.Add(s.slot); !slot.Equal(want) {
			t.Fatalf("step %d: slot t0%+v, want t0%+v", i, slot.Sub(t0), s.slot)
		}
	}
}

// Wait sleeps on the fake clock until its slot, and refuses at once,
// without sleeping or spending, a slot past maxWait or ctx's deadline.
func TestWait(t *testing.T) {
	clock := NewClock(t0)
	l := New(WithClock(clock.Now), WithSleep(clock.Sleep))
	ctx := t.Context()
	if _, err := l.Take(ctx, ten, 5); err != nil {
		t.Fatal(err)
	}
	r, err := l.Wait(ctx, ten, 2, time.Second)
	if err != nil || !r.Slot.Equal(t0.Add(200*time.Millisecond)) || !clock.Now().Equal(r.Slot) {
		t.Fatalf("Wait = (%+v, %v) at t0%+v, want slot and clock at t0+200ms", r, err, clock.Now().Sub(t0))
	}
	if _, err := l.Wait(ctx, ten, 1, 50*time.Millisecond); !errors.Is(err, limiter.ErrExhausted) || !clock.Now().Equal(t0.Add(200*time.Millisecond)) {
		t.Fatalf("Wait past maxWait = %v at t0%+v, want ErrExhausted without sleeping", err, clock.Now().Sub(t0))
	}
	dctx, cancel := context.WithDeadline(ctx, clock.Now().Add(50*time.Millisecond))
	defer cancel()
	if wait, ok := limiter.RetryAfter(func() error { _, err := l.Wait(dctx, ten, 1, time.Second); return err }()); !ok || wait != 50*time.Millisecond {
		t.Fatalf("Wait past the deadline: RetryAfter %v (%v), want a denial, 50ms", wait, ok)
	}
	if r, err := l.Take(ctx, ten, 1); err == nil {
		t.Fatalf("the refused Waits spent nothing, so no token is free at t0+200ms; Take = %+v", r)
	}
}

func TestReserveBatch(t *testing.T) {
	tests := []struct {
		name   string
		booked int // tokens taken first
		req    limiter.BatchRequest
		slots  []time.Duration
		wait   time.Duration
		err    error
	}{
		{"a full bucket: the burst at once, then T apart", 0, limiter.BatchRequest{N: 7, MaxDelay: time.Second},
			[]time.Duration{0, 0, 0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond}, 0, nil},
		{"ahead: every slot at least that far off", 0, limiter.BatchRequest{N: 7, MaxDelay: time.Second, Ahead: 150 * time.Millisecond},
			[]time.Duration{150 * time.Millisecond, 150 * time.Millisecond, 150 * time.Millisecond, 150 * time.Millisecond, 150 * time.Millisecond, 250 * time.Millisecond, 350 * time.Millisecond}, 0, nil},
		{"whole or nothing: the wait until it fits", 5, limiter.BatchRequest{N: 3, MaxDelay: 100 * time.Millisecond}, nil, 200 * time.Millisecond, nil},
		{"partial: what fits", 5, limiter.BatchRequest{N: 3, MaxDelay: 200 * time.Millisecond, Partial: true},
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, 0, nil},
		{"partial on an empty bucket: the wait for one", 5, limiter.BatchRequest{N: 3, Partial: true}, nil, 100 * time.Millisecond, nil},
		{"N over MaxBatch", 0, limiter.BatchRequest{N: limiter.MaxBatch + 1}, nil, 0, limiter.ErrInvalidArgument},
		{"N that can never fit", 0, limiter.BatchRequest{N: 8, MaxDelay: 200 * time.Millisecond}, nil, 0, limiter.ErrNeverGrantable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := NewClock(t0)
			l := New(WithClock(clock.Now))
			if tt.booked > 0 {
				if _, err := l.Take(t.Context(), ten, tt.booked); err != nil {
					t.Fatal(err)
				}
			}
			b, err := l.ReserveBatch(t.Context(), ten, tt.req)
			switch wait, denied := limiter.RetryAfter(err); {
			case tt.err != nil:
				if !errors.Is(err, tt.err) {
					t.Fatalf("err %v, want %v", err, tt.err)
				}
				return
			case tt.wait != 0:
				if !denied || wait != tt.wait {
					t.Fatalf("(%+v, %v), want a denial with RetryAfter %v", b, err, tt.wait)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			got := make([]time.Duration, len(b.Slots))
			for i, s := range b.Slots {
				got[i] = s.Sub(t0)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.slots) || b.Requested != tt.req.N {
				t.Fatalf("slots %v (requested %d), want %v (%d)", got, b.Requested, tt.slots, tt.req.N)
			}
		})
	}
}

// Several buckets grant together or not at all; the denial names the
// bucket that waits longest.
func TestMulti(t *testing.T) {
	clock := NewClock(t0)
	l := New(WithClock(clock.Now))
	ctx := t.Context()
	perMinute := limiter.Bucket{Key: "cm#cred#rates#w0", Limit: limiter.PerMinute(6, 2)} // T = 10s
	both := []limiter.Bucket{ten, perMinute}
	if r, err := l.TakeMulti(ctx, both, 2); err != nil || !r.Slot.Equal(t0) {
		t.Fatalf("TakeMulti = (%+v, %v), want granted now", r, err)
	}
	_, err := l.TakeMulti(ctx, both, 1)
	var ex *limiter.ExhaustedError
	if !errors.As(err, &ex) || ex.Key != perMinute.Key || ex.RetryAfter != 10*time.Second {
		t.Fatalf("TakeMulti = %v, want a denial by %s for 10s", err, perMinute.Key)
	}
	// The denial charged nothing: ten still holds 3.
	if _, err := l.Take(ctx, ten, 3); err != nil {
		t.Fatalf("Take after a denied TakeMulti: %v, want the 3 tokens left", err)
	}
	r, err := l.ReserveMulti(ctx, both, 1, time.Minute)
	if err != nil || !r.Slot.Equal(t0.Add(10*time.Second)) || r.Binding != perMinute.Key {
		t.Fatalf("ReserveMulti = (%+v, %v), want slot t0+10s bound by %s", r, err, perMinute.Key)
	}
	// WaitMulti sleeps on the clock until the common slot.
	w := New(WithClock(clock.Now), WithSleep(clock.Sleep))
	if _, err := w.TakeMulti(ctx, both, 2); err != nil {
		t.Fatal(err)
	}
	if r, err := w.WaitMulti(ctx, both, 1, time.Minute); err != nil || !r.Slot.Equal(t0.Add(10*time.Second)) || !clock.Now().Equal(r.Slot) {
		t.Fatalf("WaitMulti = (%+v, %v) at t0%+v, want slot and clock at t0+10s", r, err, clock.Now().Sub(t0))
	}
	if _, err := l.TakeMulti(ctx, []limiter.Bucket{ten, ten}, 1); !errors.Is(err, limiter.ErrInvalidArgument) {
		t.Fatalf("the same bucket twice: %v, want ErrInvalidArgument", err)
	}
}

func TestStateFirstConfirmAndFaults(t *testing.T) {
	clock := NewClock(t0)
	down := false
	l := New(WithClock(clock.Now), WithFault(func(op, key string) error {
		if down {
			return fmt.Errorf("%w: %s %s: store down", limiter.ErrUnavailable, op, key)
		}
		return nil
	}))
	ctx := t.Context()
	if s, err := l.State(ctx, ten); err != nil || s.Tokens != 5 || !s.TAT.IsZero() {
		t.Fatalf("State of a new bucket = (%+v, %v), want 5 tokens, no tat", s, err)
	}
	if _, err := l.Take(ctx, ten, 3); err != nil {
		t.Fatal(err)
	}
	if s, _ := l.State(ctx, ten); s.Tokens != 2 || s.FullAfter != 300*time.Millisecond {
		t.Fatalf("State = %+v, want 2 tokens, full after 300ms", s)
	}
	for i, want := range []bool{true, false, false} {
		if first, err := l.First(ctx, "job-1", t0.Add(time.Minute)); err != nil || first != want {
			t.Fatalf("First #%d = (%v, %v), want %v", i, first, err, want)
		}
	}
	clock.Advance(time.Minute)
	if first, _ := l.First(ctx, "job-1", t0.Add(2*time.Minute)); !first {
		t.Fatal("First after until = false, want true: the fence expired")
	}
	if ok, err := l.Confirm(ctx, ten, limiter.Stamp{}); !ok || err != nil {
		t.Fatalf("Confirm = (%v, %v), want true", ok, err)
	}
	down = true
	if _, err := l.Take(ctx, ten, 1); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("Take with the store down = %v, want ErrUnavailable", err)
	}
	if _, err := l.First(ctx, "job-2", t0.Add(time.Hour)); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("First with the store down = %v, want ErrUnavailable", err)
	}
	down = false
	if s, _ := l.State(ctx, ten); s.Tokens != 5 {
		t.Fatalf("a faulted Take spent tokens: %+v", s)
	}
	adaptive := ten
	adaptive.Adaptive = &limiter.Adaptive{}
	if _, err := l.Take(ctx, adaptive, 1); !errors.Is(err, limiter.ErrInvalidArgument) {
		t.Fatalf("an adaptive bucket: %v, want ErrInvalidArgument", err)
	}
}

// A Penalize's silence holds until its until, and a Reset ends it.
func TestSilenceUntilPenaltyEndsOrReset(t *testing.T) {
	clock := NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := New(WithClock(clock.Now))
	ctx := context.Background()
	b := limiter.Bucket{Key: "k", Limit: limiter.PerSecond(10, 5)}
	t0 := clock.Now()
	if err := l.Penalize(ctx, b, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		at   time.Duration
		want time.Time
	}{{0, t0.Add(3 * time.Second)}, {2 * time.Second, t0.Add(3 * time.Second)}, {3 * time.Second, time.Time{}}} {
		clock.Advance(t0.Add(tt.at).Sub(clock.Now()))
		if got, err := l.Silence(ctx, b); err != nil || !got.Equal(tt.want) {
			t.Fatalf("at t0+%v: silence until %v (%v), want %v", tt.at, got, err, tt.want)
		}
	}
	if err := l.Penalize(ctx, b, clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Silence(ctx, b); err != nil || !got.IsZero() {
		t.Fatalf("after a Reset: silence until %v (%v), want none", got, err)
	}
}

// KnownSilence answers the silence a Penalize asked with no call: a store
// outage (WithFault) that fails Silence does not keep it from answering.
func TestKnownSilenceAnswersThroughAnOutage(t *testing.T) {
	clock := NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	down := false
	l := New(WithClock(clock.Now), WithFault(func(string, string) error {
		if down {
			return fmt.Errorf("%w: store down", limiter.ErrUnavailable)
		}
		return nil
	}))
	ctx := context.Background()
	b := limiter.Bucket{Key: "k", Limit: limiter.PerSecond(10, 5)}
	t0 := clock.Now()
	if err := l.Penalize(ctx, b, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	down = true
	if _, err := l.Silence(ctx, b); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("Silence in the outage: %v, want ErrUnavailable", err)
	}
	for _, tt := range []struct {
		at   time.Duration
		key  string
		want time.Time
	}{{30 * time.Second, "k", t0.Add(time.Minute)}, {30 * time.Second, "other", time.Time{}}, {time.Minute, "k", time.Time{}}} {
		clock.Advance(t0.Add(tt.at).Sub(clock.Now()))
		if got := l.KnownSilence(limiter.Bucket{Key: tt.key, Limit: b.Limit}); !got.Equal(tt.want) {
			t.Fatalf("at t0+%v, bucket %q: known silence until %v, want %v", tt.at, tt.key, got, tt.want)
		}
	}
}

// A bucket booked ahead to next grants its next token at next, and each
// after it one interval later; booking it to an earlier time changes
// nothing. Figures by hand: ten is 10/s (T = 100 ms), burst 5.
func TestBookAheadSlotsTheNextGrant(t *testing.T) {
	clock := NewClock(t0)
	l := New(WithClock(clock.Now))
	ctx := t.Context()
	for _, next := range []time.Duration{2 * time.Second, time.Second} {
		if err := l.BookAhead(ten, t0.Add(next)); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []time.Duration{2 * time.Second, 2100 * time.Millisecond} {
		if r, err := l.Reserve(ctx, ten, 1, time.Minute); err != nil || !r.Slot.Equal(t0.Add(want)) {
			t.Fatalf("reservation %d = (%v, %v), want slot t0+%v", i, r.Slot.Sub(t0), err, want)
		}
	}
	if _, err := l.Reserve(ctx, ten, 1, time.Second); !errors.Is(err, limiter.ErrExhausted) {
		t.Fatalf("a reservation within 1 s of a bucket booked 2.2 s ahead = %v, want ErrExhausted", err)
	}
	if err := l.BookAhead(limiter.Bucket{Key: "k"}, t0); !errors.Is(err, limiter.ErrInvalidArgument) {
		t.Fatalf("BookAhead of a bucket with no limit = %v, want ErrInvalidArgument", err)
	}
}

// Calls lists every call in order, with its key, tokens, bucket's limit
// and the bound its slot was asked within, those a fault answered
// included; a multi-bucket call is one for each bucket.
// With a latency, the answer comes that long after the call decided: the
// slot granted at the call's now is past by then, and a Wait sleeps only
// what is left until its slot.
func TestCallsAndLatency(t *testing.T) {
	clock := NewClock(t0)
	other := limiter.Bucket{Key: "other", Limit: limiter.PerSecond(1, 1)}
	latency := map[string]time.Duration{"Reserve": 30 * time.Millisecond, "Wait": 40 * time.Millisecond}
	l := New(WithClock(clock.Now), WithSleep(clock.Sleep),
		WithLatency(func(op, _ string) time.Duration { return latency[op] }),
		WithFault(func(op, key string) error {
			if key == "other" && op == "Silence" {
				return fmt.Errorf("%w: store down", limiter.ErrUnavailable)
			}
			return nil
		}))
	ctx := t.Context()
	r, err := l.Reserve(ctx, ten, 2, time.Second)
	if err != nil || !r.Slot.Equal(t0) || !clock.Now().Equal(t0.Add(30*time.Millisecond)) {
		t.Fatalf("Reserve = (%v, %v), answered at t0+%v; want the slot t0, answered at t0+30ms", r.Slot.Sub(t0), err, clock.Now().Sub(t0))
	}
	if _, err := l.Silence(ctx, other); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("Silence = %v, want the fault's ErrUnavailable", err)
	}
	if _, err := l.ReserveMulti(ctx, []limiter.Bucket{ten, other}, 1, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	_ = l.KnownSilence(ten)
	if err := l.BookAhead(ten, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	w, err := l.Wait(ctx, ten, 1, 2*time.Second)
	if err != nil || !w.Slot.Equal(t0.Add(time.Second)) || !clock.Now().Equal(w.Slot) {
		t.Fatalf("Wait = (%v, %v), returned at t0+%v; want its slot t0+1s, returned at it", w.Slot.Sub(t0), err, clock.Now().Sub(t0))
	}
	want := []Call{{Op: "Reserve", Key: "cm#cred#rates", N: 2, Limit: ten.Limit, MaxDelay: time.Second}, {Op: "Silence", Key: "other", Limit: other.Limit},
		{Op: "ReserveMulti", Key: "cm#cred#rates", N: 1, Limit: ten.Limit, MaxDelay: 500 * time.Millisecond},
		{Op: "ReserveMulti", Key: "other", N: 1, Limit: other.Limit, MaxDelay: 500 * time.Millisecond},
		{Op: "Wait", Key: "cm#cred#rates", N: 1, Limit: ten.Limit, MaxDelay: 2 * time.Second}}
	if got := l.Calls(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Calls = %v, want %v", got, want)
	}
}
