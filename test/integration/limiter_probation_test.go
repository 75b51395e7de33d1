package integration

import (
	"context"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// A bucket of fixed rate that the vendor refuses again right after the
// silence it asked for is put on probation, on the emulator: its slots
// come two intervals apart for every worker (one that saw the item before
// the probation grants once unspaced, and learns it from that answer), a
// batch's slots and a transaction's grants too, until four times the
// silence has passed (at least a minute); a refusal later within it keeps
// it, and a Reset ends it. The first refusal, and one of a request long
// after a silence, change nothing: a vendor refuses one request among many
// for reasons of its own.
func TestThrottleRefusedRightAfterASilencePutsABucketOnProbation(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	ctx := context.Background()
	w, other := newWorker(t, table, limiter.WithClock(clock.Now)), newWorker(t, table, limiter.WithClock(clock.Now))
	t0 := clock.Now()
	at := func(d time.Duration) { clock.Set(t0.Add(d)) }
	b := limiter.Bucket{Key: "booking_com#cred-probation#availability", Limit: limiter.PerSecond(10, 1)} // 100 ms
	refused := func(slot, until time.Duration) {
		t.Helper()
		if err := w.Throttle(ctx, b, &limiter.Stamp{Slot: t0.Add(slot).UnixMicro(), Tokens: 1}, t0.Add(until)); err != nil {
			t.Fatal(err)
		}
	}
	takes := func(name string, from time.Duration, want ...time.Duration) {
		t.Helper()
		for i, wantWait := range want {
			at(from + time.Duration(i)*100*time.Millisecond)
			takeAt(t, other, b, clock, t0, name, wantWait)
		}
	}
	const (
		granted = time.Duration(0)
		T       = 100 * time.Millisecond
	)

	// The first refusal: a silence until t0+2 s, no probation.
	at(0)
	refused(0, 2*time.Second)
	takes("after the first silence", 2100*time.Millisecond, granted, granted, granted)
	if f := w.Spacing(b); f != 1 {
		t.Fatalf("Spacing after the first refusal = %d, want 1", f)
	}

	// The request at t0+2.1 s, the first after that silence, refused
	// with a silence until t0+4 s: probation at 2, until t0+64 s.
	at(2150 * time.Millisecond)
	refused(2100*time.Millisecond, 4*time.Second)
	if f := w.Spacing(b); f != 2 {
		t.Fatalf("Spacing after a refusal right after the silence = %d, want 2", f)
	}
	// other last saw the item before the probation: its first take is
	// unspaced and hands it back; from then on a take every 200 ms.
	takes("on probation", 4100*time.Millisecond, granted, granted, T, granted, T, granted)

	// A batch on probation: its slots 200 ms apart.
	at(10 * time.Second)
	batch, err := other.ReserveBatch(ctx, b, limiter.BatchRequest{N: 3, MaxDelay: time.Second, Partial: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Slots) != 3 || batch.Slots[1].Sub(batch.Slots[0]) != 2*T || batch.Slots[2].Sub(batch.Slots[1]) != 2*T {
		t.Fatalf("batch on probation: slots %v, want 3, 200 ms apart", batch.Slots)
	}

	// A refusal later within the probation (at t0+30 s, asking until
	// t0+31 s) keeps it, until t0+91 s: still spaced at t0+70 s (once
	// other's first take there has handed it the new end).
	at(30 * time.Second)
	refused(30*time.Second, 31*time.Second)
	takes("probation kept", 70*time.Second, granted, granted, T, granted)
	// And over after t0+91 s.
	takes("probation over", 92*time.Second, granted, granted, granted)

	// A refusal long after the last silence (at t0+200 s, of a request sent
	// 100 s after it) is one among many: no probation.
	at(200 * time.Second)
	refused(200*time.Second, 202*time.Second)
	takes("after a refusal of no account", 202100*time.Millisecond, granted, granted, granted)

	// Put on probation again, then Reset: every worker unspaced at once
	// (Reset answers with the item).
	at(202300 * time.Millisecond)
	refused(202200*time.Millisecond, 204*time.Second)
	takes("probation again", 204100*time.Millisecond, granted, granted, T)
	// A transaction over the bucket and another (a route's limits) is
	// charged the spacing too.
	window := limiter.Bucket{Key: "booking_com#cred-probation#availability#window", Limit: limiter.PerSecond(100, 10)}
	for i, wantWait := range []time.Duration{granted, T} {
		at(204400*time.Millisecond + time.Duration(i)*T)
		_, err := other.TakeMulti(ctx, []limiter.Bucket{b, window}, 1)
		if wait, denied := limiter.RetryAfter(err); wantWait > 0 && (!denied || wait != wantWait) || wantWait == 0 && err != nil {
			t.Fatalf("TakeMulti on probation at t0+%v = %v, want retry-after %v (0: granted)", clock.Now().Sub(t0), err, wantWait)
		}
	}
	if err := other.Reset(ctx, b); err != nil {
		t.Fatal(err)
	}
	takes("after a Reset", 205*time.Second, granted, granted, granted)
}
