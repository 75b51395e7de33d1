package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// With an injected clock: max leases are granted, one write each; the next
// acquire costs one write and is told exactly when the earliest lease
// expires; a release frees its slot at once; an expired lease's slot is
// taken again, and its late release changes nothing.
func TestLeaseIsBoundedAndTellsTheEarliestExpiry(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	t0 := clock.Now()
	w := newWorker(t, table, limiter.WithClock(clock.Now))
	ctx := context.Background()
	f := limiter.InFlight{Key: "cred#availability", Max: 3, Hold: 10 * time.Second}

	var held []limiter.Lease
	slots := map[int]bool{}
	for i := range 3 {
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		before := w.calls.Answered()
		l, err := w.AcquireLease(ctx, f)
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		if n := w.calls.Answered() - before; n > 2 {
			t.Errorf("acquire %d cost %d writes, want at most 2", i, n)
		}
		if slots[l.Slot] || l.Slot >= 3 {
			t.Fatalf("acquire %d got slot %d, held %v", i, l.Slot, slots)
		}
		if want := clock.Now().Add(f.Hold); !l.Expires.Equal(want) {
			t.Errorf("lease %d expires %v, want now + hold = %v", i, l.Expires, want)
		}
		slots[l.Slot] = true
		held = append(held, l)
	}

	clock.Set(t0.Add(3 * time.Second))
	before := w.calls.Answered()
	_, err := w.AcquireLease(ctx, f)
	var busy *limiter.LeaseBusyError
	if !errors.As(err, &busy) || !errors.Is(err, limiter.ErrExhausted) {
		t.Fatalf("a 4th acquire: %v, want a *LeaseBusyError matching ErrExhausted", err)
	}
	if busy.RetryAfter != 7*time.Second || busy.Held != 3 {
		t.Errorf("busy = %+v, want 3 held and retry after 7s (the first lease expires at t0+10s)", busy)
	}
	if d, ok := limiter.RetryAfter(err); !ok || d != 7*time.Second {
		t.Errorf("limiter.RetryAfter = %v, %v; want 7s, true", d, ok)
	}
	if n := w.calls.Answered() - before; n != 1 {
		t.Errorf("learning that no slot is free cost %d writes, want 1 (ALL_OLD shows every slot)", n)
	}

	if err := w.ReleaseLease(ctx, held[1]); err != nil {
		t.Fatal(err)
	}
	// A second release (an SDK retry whose first write landed while its
	// answer was lost) finds the slot free: nothing to report.
	if err := w.ReleaseLease(ctx, held[1]); err != nil {
		t.Fatalf("releasing twice: %v, want nil", err)
	}
	l, err := w.AcquireLease(ctx, f)
	if err != nil || l.Slot != held[1].Slot {
		t.Fatalf("after a release: %+v, %v; want slot %d", l, err, held[1].Slot)
	}
	live, err := w.Leases(ctx, f.Key)
	if err != nil || len(live) != 3 {
		t.Fatalf("Leases = %v, %v; want 3 live", live, err)
	}

	// The first lease expires at t0+10s; its slot is free at that instant.
	clock.Set(t0.Add(10 * time.Second))
	l, err = w.AcquireLease(ctx, f)
	if err != nil || l.Slot != held[0].Slot {
		t.Fatalf("at the first lease's expiry: %+v, %v; want slot %d", l, err, held[0].Slot)
	}
	if err := w.ReleaseLease(ctx, held[0]); !errors.Is(err, limiter.ErrLeaseLost) {
		t.Errorf("the expired lease's release: %v, want ErrLeaseLost", err)
	}
	if live, _ := w.Leases(ctx, f.Key); len(live) != 3 {
		t.Errorf("after a late release %d leases live, want 3 (it must not free the new holder's slot)", len(live))
	}
}

// A lowered max holds: while a lease above the new max lives, nobody
// acquires under the new one, even with lower slots free.
func TestLoweredMaxInFlightWaitsForTheSlotsAboveIt(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	t0 := clock.Now()
	w := newWorker(t, table, limiter.WithClock(clock.Now))
	ctx := context.Background()
	three := limiter.InFlight{Key: "cred#availability", Max: 3, Hold: 10 * time.Second}
	two := three
	two.Max = 2
	bySlot := map[int]limiter.Lease{}
	for i := range 3 {
		clock.Set(t0.Add(time.Duration(i) * time.Second))
		l, err := w.AcquireLease(ctx, three)
		if err != nil {
			t.Fatal(err)
		}
		bySlot[l.Slot] = l
	}
	if err := w.ReleaseLease(ctx, bySlot[0]); err != nil {
		t.Fatal(err)
	}
	// Each acquire tries a random slot below 2 first: 10 tries all meet
	// the free slot 0 at least once but with probability 2^-10.
	for range 10 {
		_, err := w.AcquireLease(ctx, two)
		var busy *limiter.LeaseBusyError
		if !errors.As(err, &busy) {
			t.Fatalf("max 2 with slot 0 free and slot 2 held: %v, want busy", err)
		}
		if want := bySlot[2].Expires.Sub(clock.Now()); busy.RetryAfter != want {
			t.Errorf("retry after %v, want %v (slot 2's expiry)", busy.RetryAfter, want)
		}
	}
	if err := w.ReleaseLease(ctx, bySlot[2]); err != nil {
		t.Fatal(err)
	}
	l, err := w.AcquireLease(ctx, two)
	if err != nil || l.Slot >= 2 {
		t.Fatalf("max 2 after slot 2 drained: %+v, %v", l, err)
	}
}

// An acquire whose answer is lost is recognised by its retry (ALL_OLD shows
// its own id): one lease, not one held and one leaked until it expires.
func TestLeaseAcquireWithALostAnswerHoldsOneSlot(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	var lost atomic.Int32
	db := &dynamotest.Faulty{DB: emulator.DynamoDB(t), F: dynamotest.LoseResponses(func(op string) bool {
		return op == "UpdateItem" && lost.Add(1) == 1
	})}
	l, err := limiter.New(db, limiter.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	f := limiter.InFlight{Key: "cred#availability", Max: 3, Hold: 10 * time.Second}
	lease, err := l.AcquireLease(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	live, err := l.Leases(context.Background(), f.Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0].Owner != lease.Owner || live[0].Slot != lease.Slot {
		t.Errorf("after a lost answer %d leases live (%+v), want exactly the one returned (%+v)", len(live), live, lease)
	}
}

// A lease item with every slot held stays under 1 KB: each acquire and
// release is 1 write unit.
func TestLeaseItemIsOneWriteUnit(t *testing.T) {
	t.Parallel()
	ddb := emulator.DynamoDB(t)
	table := emulator.NewTable(t, ddb)
	w := newWorker(t, table)
	key := "booking_com#a-credential-of-some-length-0123456789#availability"
	f := limiter.InFlight{Key: key, Max: limiter.MaxLeases, Hold: limiter.MaxLeaseHold}
	for range limiter.MaxLeases {
		if _, err := w.AcquireLease(context.Background(), f); err != nil {
			t.Fatal(err)
		}
	}
	out, err := ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{limiter.KeyAttribute: &types.AttributeValueMemberS{Value: limiter.LeaseKey(key)}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := benchkit.ItemBytes(out.Item); n > 1024 {
		t.Errorf("a full lease item is %d bytes, over 1 KB (2 write units per write)", n)
	} else {
		t.Logf("a full lease item (%d slots) is %d bytes", limiter.MaxLeases, n)
	}
}

// Pushers of one process through one LeaseGate: never more than max at
// once (counted by the test, not the gate), every Wait ends in a lease,
// and passes within the process cost fewer writes than acquire + release.
func TestLeaseGatePassesLeasesWithinAProcess(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	w := newWorker(t, table)
	g := limiter.NewLeaseGate(w.Limiter)
	f := limiter.InFlight{Key: "cred#availability", Max: 2, Hold: 5 * time.Second, Timeout: 2 * time.Second}
	var (
		mu            sync.Mutex
		running, peak int
		wg            sync.WaitGroup
		pushes        atomic.Int64
		errs          = make(chan error, 64)
	)
	for p := range 8 {
		wg.Go(func() {
			for range 5 {
				lease, err := g.Wait(context.Background(), f, 30*time.Second)
				if err != nil {
					errs <- fmt.Errorf("pusher %d: %w", p, err)
					return
				}
				mu.Lock()
				running++
				peak = max(peak, running)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				running--
				mu.Unlock()
				pushes.Add(1)
				if err := g.Release(context.Background(), lease); err != nil {
					errs <- fmt.Errorf("pusher %d release: %w", p, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if peak > 2 || peak < 1 || pushes.Load() != 40 {
		t.Errorf("peak %d concurrent, %d pushes; want at most 2 and 40", peak, pushes.Load())
	}
	if live, err := w.Leases(context.Background(), f.Key); err != nil || len(live) != 0 {
		t.Errorf("after every release: %v, %v; want no lease held", live, err)
	}
	writes := w.calls.Answered()
	if writes >= 2*40 {
		t.Errorf("%d writes for 40 pushes: no pass within the process saved a write", writes)
	}
	t.Logf("40 pushes, peak %d, %d writes (%.2f per push)", peak, writes, float64(writes)/40)
}

// Contended says what a process knows of its lease set without asking the
// store: a lease of it is waited for by a push of the process, or the
// store's last "no free slot" to the process still runs. A caller books
// what only the lease's holder can spend after the lease while it holds.
func TestLeaseGateKnowsItsLeaseSetIsContended(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	holder := limiter.NewLeaseGate(newWorker(t, table, limiter.WithClock(clock.Now)).Limiter)
	other := limiter.NewLeaseGate(newWorker(t, table, limiter.WithClock(clock.Now)).Limiter)
	ctx := context.Background()
	f := limiter.InFlight{Key: "cred#availability", Max: 1, Hold: 5 * time.Second}
	contended := func(step string, want bool, g *limiter.LeaseGate) {
		t.Helper()
		if got := g.Contended(f.Key); got != want {
			t.Fatalf("%s: Contended = %v, want %v", step, got, want)
		}
	}

	contended("no lease asked for", false, holder)
	lease, err := holder.Wait(ctx, f, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	contended("the only lease held, no push waiting", false, holder)

	var busy *limiter.LeaseBusyError
	if _, err := other.Wait(ctx, f, 20*time.Millisecond); !errors.As(err, &busy) {
		t.Fatalf("another process's wait: %v, want *LeaseBusyError", err)
	}
	contended("the store said no slot is free for 5s", true, other)
	contended("the holder, told nothing", false, holder)

	got := make(chan error, 1)
	go func() {
		next, err := holder.Wait(ctx, f, time.Minute)
		if err == nil {
			err = holder.Release(ctx, next)
		}
		got <- err
	}()
	for !holder.Contended(f.Key) {
		select {
		case err := <-got:
			t.Fatalf("the second push of the holder ended its wait (%v) with the lease held", err)
		case <-time.After(time.Millisecond):
		}
	}
	if err := holder.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	contended("every lease released, no push waiting", false, holder)

	clock.Advance(5 * time.Second)
	contended("the store's no-slot ran out", false, other)
}
