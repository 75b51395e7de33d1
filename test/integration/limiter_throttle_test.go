package integration

import (
	"context"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// Throttle with no reservation (a 429 on a push whose slot this process
// did not book) on a bucket that is not adaptive is a Penalize; on an
// adaptive bucket it halves the rate and empties the bucket at the new
// rate until Retry-After, unless the rate changed less than ThrottleHold
// ago, when only the penalty applies.
func TestThrottleWithoutAReservation(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	ctx := context.Background()
	w, other := newWorker(t, table, limiter.WithClock(clock.Now)), newWorker(t, table, limiter.WithClock(clock.Now))
	t0 := clock.Now()
	at := func(d time.Duration) { clock.Set(t0.Add(d)) }
	state := func(b limiter.Bucket, name string, tat time.Duration, rate float64, version int64) {
		t.Helper()
		st, err := other.State(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if !st.TAT.Equal(t0.Add(tat)) || st.Rate != rate || st.Adapt.Version != version {
			t.Fatalf("%s: tat t0+%v, rate %v, version %d; want tat t0+%v, rate %v, version %d",
				name, st.TAT.Sub(t0), st.Rate, st.Adapt.Version, tat, rate, version)
		}
	}
	take := func(b limiter.Bucket, name string, wantWait time.Duration) {
		t.Helper()
		takeAt(t, other, b, clock, t0, name, wantWait)
	}

	// Not adaptive, 10/s burst 5: the bucket is empty until Retry-After
	// and refills at the rate after it: tat = t0 + 2 s + 500 ms.
	plain := limiter.Bucket{Key: "booking_com#cred-throttle#availability", Limit: limiter.PerSecond(10, 5)}
	if err := w.Throttle(ctx, plain, nil, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	state(plain, "plain bucket after the throttle", 2500*time.Millisecond, 10, 0)
	at(2 * time.Second)
	take(plain, "plain take at Retry-After", 100*time.Millisecond)
	at(2100 * time.Millisecond)
	take(plain, "plain take one interval later", 0)

	// Adaptive, 20/s burst 4. The first throttle halves 20/s to 10/s
	// (interval 100 ms) and empties the bucket at 10/s until Retry-After
	// t0 + 1 s: tat = t0 + 1 s + 4 × 100 ms.
	at(0)
	ad := limiter.Bucket{Key: "expedia#cred-throttle#rates", Limit: limiter.PerSecond(20, 4),
		Adaptive: &limiter.Adaptive{MinRate: 1, Quiet: 10 * time.Second, Increase: 1}}
	take(ad, "adaptive take before the throttle", 0)
	if err := w.Throttle(ctx, ad, nil, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	state(ad, "after the first throttle", 1400*time.Millisecond, 10, 1)
	at(time.Second)
	take(ad, "adaptive take at Retry-After", 100*time.Millisecond) // 1.4 + 0.1 − 0.4 − 1.0
	at(1100 * time.Millisecond)
	take(ad, "adaptive take one 10/s interval later", 0) // tat t0 + 1.5 s

	// A second throttle 1.1 s after the change (within ThrottleHold) is
	// the same overload: 10/s stays, and its Retry-After t0 + 1.5 s
	// empties the bucket until then: tat = 1.5 + 0.4 = t0 + 1.9 s.
	if err := w.Throttle(ctx, ad, nil, t0.Add(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	state(ad, "after a throttle within ThrottleHold", 1900*time.Millisecond, 10, 1)

	// At t0 + 3 s, past ThrottleHold and still in the quiet period (10 s),
	// a throttle is a new signal: 10/s halves to 5/s (200 ms) and the
	// bucket is empty until t0 + 3 s + 4 × 200 ms.
	at(3 * time.Second)
	if err := w.Throttle(ctx, ad, nil, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	state(ad, "after a throttle past ThrottleHold", 3800*time.Millisecond, 5, 2)
	take(ad, "adaptive take after the halving", 200*time.Millisecond) // 3.8 + 0.2 − 0.8 − 3.0
}
