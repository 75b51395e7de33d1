package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// A Reset while slots booked up to 15 minutes ahead are held lifts the
// penalty beyond them but never grants on top of them: every held slot and
// every grant after the Reset, checked together by the mock vendor's own
// window count (which shares no code with the limiter), stay within
// burst + rate·W. With nothing booked, Reset still refills the bucket.
func TestResetKeepsTheWindowBound(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	ctx := context.Background()
	lim := limiter.PerSecond(1, 5) // T = 1 s, burst·T = 5 s
	b := limiter.Bucket{Key: "booking_com#cred-reset-bound#availability", Limit: lim}
	disp, op, fresh := newWorker(t, table, limiter.WithClock(clock.Now)), newWorker(t, table, limiter.WithClock(clock.Now)), newWorker(t, table, limiter.WithClock(clock.Now))
	t0 := clock.Now()
	at := func(d time.Duration) { clock.Set(t0.Add(d)) }

	// A dispatcher books 15 minutes of slots: the burst at t0, then one a
	// second up to t0 + 900 s; tat = t0 + 905 s.
	held, err := disp.ReserveBatch(ctx, b, limiter.BatchRequest{N: 905, MaxDelay: 15 * time.Minute})
	if err != nil || len(held.Slots) != 905 || !held.Slots[4].Equal(t0) || !held.Slots[904].Equal(t0.Add(900*time.Second)) {
		t.Fatalf("booking 15 min ahead: %d slots, %v; want 905, t0 ×5 then t0+1s … t0+900s", len(held.Slots), err)
	}
	// At t0 + 10 s the vendor answers 429 with Retry-After 20 min, and an
	// operator resets the bucket to undo the penalty.
	at(10 * time.Second)
	if err := disp.Penalize(ctx, b, clock.Now().Add(20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := op.Reset(ctx, b); err != nil {
		t.Fatal(err)
	}

	// Everything the fleet can get after the Reset: a batch as large as
	// the horizon allows from a process that never saw the bucket, a
	// single reservation from the dispatcher that saw the penalty, and
	// takes up to the burst at three instants.
	var after []time.Time
	batch, err := fresh.ReserveBatch(ctx, b, limiter.BatchRequest{N: 100, MaxDelay: 15 * time.Minute, Partial: true})
	if err != nil {
		t.Fatalf("batch after the Reset: %v", err)
	}
	after = append(after, batch.Slots...)
	at(11 * time.Second)
	r, err := disp.Reserve(ctx, b, 1, 15*time.Minute)
	switch {
	case err == nil:
		after = append(after, r.Slot)
	case !errors.Is(err, limiter.ErrExhausted):
		t.Fatalf("the dispatcher's reservation after the Reset: %v", err)
	}
	for _, d := range []time.Duration{11 * time.Second, 911 * time.Second, 1000 * time.Second} {
		at(d)
		for range lim.Burst + 1 {
			r, err := fresh.Take(ctx, b, 1)
			if errors.Is(err, limiter.ErrExhausted) {
				break
			}
			if err != nil {
				t.Fatalf("Take at t0+%v: %v", d, err)
			}
			after = append(after, r.Slot)
		}
	}
	arrivals := append(append([]time.Time(nil), held.Slots...), after...)
	if err := window.Check(arrivals, window.Limit{Rate: lim.Rate, Burst: lim.Burst}); err != nil {
		t.Fatalf("held slots + grants after the Reset: %v", err)
	}

	// The values by hand. The Reset left tat at the booked horizon,
	// t0 + 905 s (not the penalty's t0 + 10 s + 20 min + 5 s): the batch at
	// t0 + 10 s fits 10 slots, (10 + 900 + 5 − 905) / 1, at
	// 905 + 1 + i − 5 = t0 + 901 s … t0 + 910 s; the dispatcher's at t0 + 11 s
	// is t0 + 911 s; nothing is taken at t0 + 11 s nor at t0 + 911 s
	// (tat t0 + 916 s leaves 0 tokens), and at t0 + 1000 s the full burst.
	for i, s := range batch.Slots {
		if want := t0.Add(time.Duration(901+i) * time.Second); !s.Equal(want) {
			t.Fatalf("batch slot %d at t0+%v, want t0+%v", i, s.Sub(t0), want.Sub(t0))
		}
	}
	if len(batch.Slots) != 10 {
		t.Fatalf("the batch after the Reset booked %d slots, want 10", len(batch.Slots))
	}
	if want := t0.Add(911 * time.Second); err != nil || !r.Slot.Equal(want) {
		t.Fatalf("the dispatcher's reservation after the Reset = %v (slot t0+%v); want slot t0+%v", err, r.Slot.Sub(t0), want.Sub(t0))
	}
	if n := len(after) - 11; n != lim.Burst {
		t.Fatalf("takes after the Reset: %d granted, want %d (all at t0+1000s)", n, lim.Burst)
	}

	// With nothing booked, Reset undoes a penalty whole: the burst at once.
	idle := limiter.Bucket{Key: "booking_com#cred-reset-idle#availability", Limit: lim}
	if err := disp.Penalize(ctx, idle, clock.Now().Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := op.Reset(ctx, idle); err != nil {
		t.Fatal(err)
	}
	for i := range lim.Burst {
		if _, err := disp.Take(ctx, idle, 1); err != nil {
			t.Fatalf("take %d after resetting a penalty with nothing booked: %v, want the burst", i, err)
		}
	}
	if _, err := disp.Take(ctx, idle, 1); !errors.Is(err, limiter.ErrExhausted) {
		t.Fatalf("take beyond the burst = %v, want denied", err)
	}
}

// A worker that saw a 2 min penalty, asked again in the second after an
// operator's Reset, is told the wait the bucket has after the Reset (the
// slots it holds), not the penalty's: a dispatcher would otherwise defer
// its jobs for the old wait and count a deferral for each. The resetting
// process knows at once too, and denials the booked slots alone explain
// are still answered with no call.
func TestDenialAfterResetCarriesTheNewWait(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	ctx := context.Background()
	b := limiter.Bucket{Key: "expedia#cred-reset-wait#ari", Limit: limiter.PerSecond(10, 5)} // T = 100 ms, burst·T = 500 ms
	warm, op := newWorker(t, table, limiter.WithClock(clock.Now)), newWorker(t, table, limiter.WithClock(clock.Now))
	t0 := clock.Now()
	at := func(d time.Duration) { clock.Set(t0.Add(d)) }
	denied := func(w worker, name string, maxDelay, want time.Duration, maxWrites int64) {
		t.Helper()
		before := w.calls.Answered()
		_, err := w.Reserve(ctx, b, 1, maxDelay)
		wait, ok := limiter.RetryAfter(err)
		if !ok || wait != want {
			t.Fatalf("%s at t0+%v = %v, want a denial with retry-after %v", name, clock.Now().Sub(t0), err, want)
		}
		if n := w.calls.Answered() - before; n > maxWrites {
			t.Fatalf("%s cost %d writes, want at most %d", name, n, maxWrites)
		}
	}

	// Slots booked 30 s ahead (tat = t0 + 30.5 s), then a 429 with
	// Retry-After 2 min: tat = t0 + 120.5 s.
	if _, err := warm.ReserveBatch(ctx, b, limiter.BatchRequest{N: 305, MaxDelay: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := warm.Penalize(ctx, b, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The old wait: 120.5 + 0.1 − 0.5 = 120.1 s.
	denied(warm, "Take before the Reset", 0, 120100*time.Millisecond, 1)

	at(100 * time.Millisecond)
	if err := op.Reset(ctx, b); err != nil {
		t.Fatal(err)
	}
	// In the second after the Reset: tat is back at the booked horizon,
	// so the wait is 30.5 + 0.1 − 0.5 − 0.2 = 29.9 s.
	at(200 * time.Millisecond)
	denied(warm, "the warm worker's Take", 0, 29900*time.Millisecond, 1)
	denied(op, "the resetting process's Take", 0, 29900*time.Millisecond, 0)
	// A dispatcher's reservation bounded at 15 s: 14.9 s, from the cache.
	denied(warm, "the warm worker's Reserve within 15 s", 15*time.Second, 14900*time.Millisecond, 0)
}
