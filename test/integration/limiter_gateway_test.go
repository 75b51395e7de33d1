package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// Once the circuit breaker is open, no call of the limiter reaches
// DynamoDB but the writes that record a vendor's silence (Penalize,
// Throttle): a silence heard must reach the fleet as soon as the store
// answers, not a cooldown later. The reads (Confirm, State) and the fence
// (First) fail closed like the grants do, with ErrUnavailable wrapping
// breaker.ErrOpen. After the cooldown every kind of call reaches the
// store again.
func TestEveryStoreCallPassesTheBreaker(t *testing.T) {
	t.Parallel()
	db := emulator.DynamoDB(t)
	table := emulator.NewTable(t, db)
	down := errors.New("injected: store unreachable")
	f := &dynamotest.Faulty{DB: db, F: dynamotest.Fault{Before: func(string) error { return down }}}
	clock := newClock()
	l, err := limiter.New(f, limiter.WithTable(table), limiter.WithClock(clock.Now),
		limiter.WithMaxAttempts(1), limiter.WithCircuitBreaker(2, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := limiter.Bucket{Key: "expedia#cred-breaker#ari", Limit: limiter.PerSecond(10, 5)}
	ad := limiter.Bucket{Key: "expedia#cred-breaker#rates", Limit: limiter.PerSecond(10, 5),
		Adaptive: &limiter.Adaptive{MinRate: 1, Quiet: 10 * time.Second, Increase: 1}}
	other := limiter.Bucket{Key: "expedia#cred-breaker#other", Limit: limiter.PerSecond(10, 5)}
	silenced := limiter.Bucket{Key: "expedia#cred-breaker#silenced", Limit: limiter.PerSecond(10, 5)}
	throttled := limiter.Bucket{Key: "expedia#cred-breaker#throttled", Limit: limiter.PerSecond(10, 5),
		Adaptive: &limiter.Adaptive{MinRate: 1, Quiet: 10 * time.Second, Increase: 1}}

	for i := range 2 {
		if _, err := l.Take(ctx, b, 1); !errors.Is(err, limiter.ErrUnavailable) || errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Take %d on a failing store = %v, want ErrUnavailable from the store itself", i, err)
		}
	}
	// The store is back, but the breaker is open for a minute: nothing
	// may reach it.
	f.Set(dynamotest.Fault{})
	calls := func(name string, call func() error) error {
		t.Helper()
		before := f.Calls()
		err := call()
		if n := f.Calls() - before; n != 0 {
			t.Errorf("%s with the breaker open sent %d call(s) to DynamoDB, want 0", name, n)
		}
		return err
	}
	open := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, limiter.ErrUnavailable) || !errors.Is(err, breaker.ErrOpen) {
			t.Errorf("%s with the breaker open = %v, want ErrUnavailable wrapping breaker.ErrOpen", name, err)
		}
	}
	probe := limiter.Probe{Version: 1, Interval: 200_000}
	var ok bool
	open("Confirm", calls("Confirm", func() (err error) { ok, err = l.Confirm(ctx, ad, probe); return err }))
	if ok {
		t.Error("Confirm with the breaker open = true, want false (fail closed)")
	}
	open("State", calls("State", func() error { _, err := l.State(ctx, b); return err }))
	open("First", calls("First", func() (err error) { ok, err = l.First(ctx, "job-1@fence", clock.Now().Add(time.Hour)); return err }))
	if ok {
		t.Error("First with the breaker open = true, want false (fail closed: the push waits)")
	}
	open("Take", calls("Take", func() error { _, err := l.Take(ctx, b, 1); return err }))
	open("Reserve", calls("Reserve", func() error { _, err := l.Reserve(ctx, b, 1, time.Minute); return err }))
	open("ReserveBatch", calls("ReserveBatch", func() error {
		_, err := l.ReserveBatch(ctx, b, limiter.BatchRequest{N: 3, MaxDelay: time.Minute})
		return err
	}))
	open("TakeMulti", calls("TakeMulti", func() error { _, err := l.TakeMulti(ctx, []limiter.Bucket{b, other}, 1); return err }))
	passes := func(name string, call func() error) {
		t.Helper()
		before := f.Calls()
		if err := call(); err != nil {
			t.Errorf("%s with the breaker open and the store back = %v, want it written", name, err)
		}
		if n := f.Calls() - before; n != 1 {
			t.Errorf("%s with the breaker open sent %d call(s) to DynamoDB, want its one write", name, n)
		}
	}
	passes("Penalize", func() error { return l.Penalize(ctx, silenced, clock.Now().Add(time.Minute)) })
	passes("Throttle", func() error { return l.Throttle(ctx, throttled, nil, clock.Now().Add(time.Minute)) })
	open("Reset", calls("Reset", func() error { return l.Reset(ctx, b) }))

	// After the cooldown the breaker lets calls through, and the first
	// success closes it.
	clock.Advance(time.Minute)
	before := f.Calls()
	if st, err := l.State(ctx, b); err != nil || st.Tokens != 5 {
		t.Fatalf("State after the cooldown = %+v, %v; want a full bucket read from the store", st, err)
	}
	if ok, err := l.First(ctx, "job-1@fence", clock.Now().Add(time.Hour)); err != nil || !ok {
		t.Fatalf("First after the cooldown = %v, %v; want true", ok, err)
	}
	if ok, err := l.Confirm(ctx, ad, probe); err != nil || !ok {
		t.Fatalf("Confirm after the cooldown = %v, %v; want true (the bucket never adapted)", ok, err)
	}
	if n := f.Calls() - before; n != 3 {
		t.Fatalf("State, First and Confirm after the cooldown sent %d calls, want 3", n)
	}
}
