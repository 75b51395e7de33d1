package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// writesPerCall runs one worker's calls one after another and records how
// many UpdateItem calls each cost, from the worker's own counter.
type writesPerCall struct {
	mu     sync.Mutex
	counts map[int64]int // writes → calls
}

func (w *writesPerCall) add(writes int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.counts == nil {
		w.counts = map[int64]int{}
	}
	w.counts[writes]++
}

func (w *writesPerCall) summary() (calls int, mean float64, maxWrites int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	total := int64(0)
	for k, n := range w.counts {
		calls += n
		total += k * int64(n)
		maxWrites = max(maxWrites, k)
	}
	if calls > 0 {
		mean = float64(total) / float64(calls)
	}
	return calls, mean, maxWrites
}

// Every call decides in at most two writes: uncontended, and with 16
// workers saturating the bucket through Wait or through Take-and-retry.
// Contention never ends a call without a decision here (no resets).
func TestWritesPerCallAtMostTwo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		workers int
		mode    consumeMode
	}{
		{1, takeRetry},
		{16, waitSlot},
		{16, takeRetry},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d workers %s", tt.workers, tt.mode), func(t *testing.T) {
			table := emulator.NewTable(t, emulator.DynamoDB(t))
			b := limiter.Bucket{Key: "expedia#cred-w#ari", Limit: limiter.PerSecond(20, 40)}
			if tt.workers == 1 {
				b.Limit = limiter.PerSecond(1000, 1000) // never runs dry
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			var hist writesPerCall
			var contended atomic.Int64
			var wg sync.WaitGroup
			for range tt.workers {
				w := newWorker(t, table)
				wg.Go(func() {
					for ctx.Err() == nil {
						before := w.calls.Answered()
						var err error
						if tt.mode == waitSlot {
							_, err = w.Wait(ctx, b, 1, 2*time.Second)
						} else {
							_, err = w.Take(ctx, b, 1)
						}
						if ctx.Err() != nil {
							return
						}
						hist.add(w.calls.Answered() - before)
						switch wait, denied := limiter.RetryAfter(err); {
						case denied:
							sleep(ctx, wait)
						case errors.Is(err, limiter.ErrContended):
							contended.Add(1)
						case err != nil && !errors.Is(err, context.DeadlineExceeded):
							t.Errorf("%s: %v", tt.mode, err)
							return
						}
					}
				})
			}
			wg.Wait()
			calls, mean, most := hist.summary()
			t.Logf("%d workers %s: %d calls, %.3f writes per call (max %d), writes:calls%s", tt.workers, tt.mode, calls, mean, most, sortedCounts(hist.counts))
			if calls == 0 {
				t.Fatal("no call completed")
			}
			if most > 2 {
				t.Errorf("a call cost %d writes, want at most 2", most)
			}
			if n := contended.Load(); n > 0 {
				t.Errorf("%d calls ended contended with no reset or conflict", n)
			}
		})
	}
}

// A write whose answer is lost (the wrapper performs the real call and then
// drops the response) is recognised by the call's retry and charged once.
// Alone on the bucket that is exact; under contention a lost answer may
// still cost its tokens with no grant (when another worker wrote in
// between), never more than one request's worth, and never an over-grant.
func TestLostResponsesAreNotChargedTwice(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{1, 8} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			db := emulator.DynamoDB(t)
			table := emulator.NewTable(t, db)
			clock := newClock() // frozen: nothing refills, so charges add up exactly
			const burst = 100
			b := limiter.Bucket{Key: "booking_com#cred-lost#rates", Limit: limiter.PerSecond(1, burst)}
			var granted, lost, calls, undecided atomic.Int64
			var wg sync.WaitGroup
			for i := range workers {
				var lose func(string) bool
				var firstOfCall atomic.Bool
				if workers == 1 {
					// The first answer of every call: its first write lands
					// unseen, and the call's second write must tell.
					lose = func(op string) bool { return op == "UpdateItem" && firstOfCall.CompareAndSwap(true, false) }
				} else {
					rng := rand.New(rand.NewPCG(uint64(i), 42))
					var mu sync.Mutex
					lose = func(op string) bool {
						mu.Lock()
						defer mu.Unlock()
						return op == "UpdateItem" && rng.Float64() < 0.25
					}
				}
				f := &dynamotest.Faulty{DB: emulator.DynamoDB(t), F: dynamotest.LoseResponses(func(op string) bool {
					if lose(op) {
						lost.Add(1)
						return true
					}
					return false
				})}
				l, err := limiter.New(f, limiter.WithTable(table), limiter.WithClock(clock.Now))
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					for range 10 * burst { // bounded: fails, never hangs
						calls.Add(1)
						firstOfCall.Store(true)
						r, err := l.Take(context.Background(), b, 1)
						switch {
						case err == nil:
							granted.Add(1)
							if !r.Slot.Equal(clock.Now()) {
								t.Errorf("Take's slot %v, want the call's own now %v", r.Slot, clock.Now())
							}
						case errors.Is(err, limiter.ErrExhausted):
							return
						case errors.Is(err, limiter.ErrUnavailable), errors.Is(err, limiter.ErrContended):
							// Every attempt's answer, or the last one, was
							// lost: the call cannot tell.
							undecided.Add(1)
						default:
							t.Errorf("Take: %v", err)
							return
						}
					}
					t.Errorf("a worker was never denied after %d calls on a %d-token bucket", 10*burst, burst)
				})
			}
			wg.Wait()
			_, tat := rawItem(t, db, table, b.Key)
			charged := (tat - clock.Now().UnixMicro()) / b.Limit.Interval()
			g, l := granted.Load(), lost.Load()
			wasted := charged - g
			t.Logf("%d workers: %d calls (%d ended undecided), %d answers lost, %d granted, %d tokens charged: %d charged without a grant (%.1f%% of lost answers)",
				workers, calls.Load(), undecided.Load(), l, g, charged, wasted, 100*float64(wasted)/float64(max(l, 1)))
			switch {
			case g == 0:
				t.Fatal("nothing granted")
			case charged > burst || g > charged:
				t.Fatalf("granted %d, charged %d of a %d-token bucket: over-grant", g, charged, burst)
			case workers == 1 && (wasted != 0 || g != burst):
				t.Fatalf("alone on the bucket: %d granted, %d wasted, want all %d granted and none wasted", g, wasted, burst)
			case wasted > l:
				t.Fatalf("%d tokens wasted by %d lost answers: more than one per lost answer", wasted, l)
			}
		})
	}
}

// An operator's Reset reaches a warm worker, whose cache had the bucket
// penalized for 10 minutes, at once: a denial from a penalty above the
// booked horizon is confirmed by a write, and the write sees the Reset; so
// does deleting the item by hand. A denial from booked slots, which a
// Reset keeps, is answered from the cache, and only a deletion by hand
// (which drops the booked slots) takes up to the denial cache age to reach
// it.
func TestResetReachesWarmWorkersWithinTheCacheAge(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"Reset", "DeleteItem"} {
		t.Run(how, func(t *testing.T) {
			db := emulator.DynamoDB(t)
			table := emulator.NewTable(t, db)
			clock := newClock()
			ctx := context.Background()
			b := limiter.Bucket{Key: "booking_com#cred-reset#availability", Limit: limiter.PerSecond(10, 5)}
			op := newWorker(t, table, limiter.WithClock(clock.Now))
			warm := newWorker(t, table, limiter.WithClock(clock.Now))
			if err := op.Penalize(ctx, b, clock.Now().Add(10*time.Minute)); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				before := warm.calls.Answered()
				if _, err := warm.Take(ctx, b, 1); !errors.Is(err, limiter.ErrExhausted) || warm.calls.Answered()-before != 1 {
					t.Fatalf("warm Take %d after the penalty = %v after %d answered writes (last unanswered: %v), want denied by one write",
						i, err, warm.calls.Answered()-before, warm.calls.LastUnanswered())
				}
			}
			undo := func() {
				t.Helper()
				if how == "Reset" {
					if err := op.Reset(ctx, b); err != nil {
						t.Fatal(err)
					}
					return
				}
				_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
					Key: map[string]types.AttributeValue{limiter.KeyAttribute: &types.AttributeValueMemberS{Value: b.Key}}})
				if err != nil {
					t.Fatal(err)
				}
			}
			undo()
			// The operator's own limiter sees it at once.
			if _, err := op.Take(ctx, b, 1); how == "Reset" && err != nil {
				t.Fatalf("the resetting worker's Take = %v, want granted", err)
			}
			before := warm.calls.Answered()
			r, err := warm.Reserve(ctx, b, 1, 15*time.Minute)
			if err != nil || r.Delay(clock.Now()) > 0 {
				t.Fatalf("warm Reserve right after the %s = %+v, %v; want granted now", how, r, err)
			}
			if w := warm.calls.Answered() - before; w > 2 {
				t.Fatalf("the warm worker's grant cost %d writes, want at most 2", w)
			}
			r, err = warm.Take(ctx, b, 1)
			if err != nil || !r.Slot.Equal(clock.Now()) {
				t.Fatalf("next warm Take = %+v, %v; want granted now", r, err)
			}
			if how == "Reset" {
				return
			}

			// Booked 5.5 s ahead: the denial comes from the cache, before
			// and after the item is deleted, until the cache age passes.
			if _, err := warm.ReserveBatch(ctx, b, limiter.BatchRequest{N: 55, MaxDelay: 5 * time.Second, Partial: true}); err != nil {
				t.Fatal(err)
			}
			for _, when := range []string{"before", "after"} {
				if when == "after" {
					undo()
				}
				before = warm.calls.Answered()
				if _, err := warm.Take(ctx, b, 1); !errors.Is(err, limiter.ErrExhausted) || warm.calls.Answered() != before {
					t.Fatalf("warm Take on booked slots %s the deletion = %v after %d writes, want a denial from the cache", when, err, warm.calls.Answered()-before)
				}
			}
			clock.Advance(limiter.DefaultDenialCacheAge + time.Microsecond)
			if r, err := warm.Take(ctx, b, 1); err != nil || !r.Slot.Equal(clock.Now()) {
				t.Fatalf("warm Take %v after the deletion = %+v, %v; want granted now", limiter.DefaultDenialCacheAge, r, err)
			}
		})
	}
}

// A store that stops answering: every attempt ends at the per-attempt
// timeout, counts as a failure, and the breaker opens.
func TestHangingStoreOpensTheBreaker(t *testing.T) {
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	f := &dynamotest.Faulty{DB: emulator.DynamoDB(t), F: dynamotest.Fault{Hang: func(string) bool { return true }}}
	l, err := limiter.New(f, limiter.WithTable(table), limiter.WithMaxAttempts(1),
		limiter.WithAttemptTimeout(200*time.Millisecond), limiter.WithCircuitBreaker(2, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b := limiter.Bucket{Key: "expedia#cred-hang#ari", Limit: limiter.PerSecond(10, 10)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 2 {
		started := time.Now()
		_, err := l.Take(ctx, b, 1)
		var te *limiter.AttemptTimeoutError
		if !errors.Is(err, limiter.ErrUnavailable) || !errors.As(err, &te) {
			t.Fatalf("Take %d on a hanging store = %v, want ErrUnavailable (attempt timeout)", i, err)
		}
		if d := time.Since(started); d > 5*time.Second {
			t.Fatalf("Take %d waited %v on a hanging store", i, d)
		}
	}
	if _, err := l.Take(ctx, b, 1); !errors.Is(err, breaker.ErrOpen) || f.Calls() != 2 {
		t.Fatalf("Take after two timeouts = %v with %d calls, want the breaker open after 2", err, f.Calls())
	}
}

// An UpdateItem refused because a transaction holds the item is retried
// and does not feed the breaker.
func TestTransactionConflictIsRetriedNotAFailure(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	var n atomic.Int64
	f := &dynamotest.Faulty{DB: emulator.DynamoDB(t), F: dynamotest.Fault{Before: func(op string) error {
		if op == "UpdateItem" && n.Add(1) <= 2 {
			return &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
		}
		return nil
	}}}
	l, err := limiter.New(f, limiter.WithTable(table), limiter.WithCircuitBreaker(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b := limiter.Bucket{Key: "expedia#cred-tx#ari", Limit: limiter.PerSecond(10, 10)}
	if _, err := l.Take(context.Background(), b, 1); err != nil {
		t.Fatalf("Take after two conflicts = %v, want granted on the third write", err)
	}
	if _, err := l.Take(context.Background(), b, 1); err != nil {
		t.Fatalf("next Take = %v: the conflicts opened the breaker", err)
	}
}

// ReserveSharded books the earliest slot among the shards, whichever it
// would have picked at random. The expected slot is computed here from
// each shard's stored tat (State), not by the limiter's decision code.
func TestReserveShardedBooksTheEarliestSlot(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	t0 := clock.Now()
	w := newTxWorker(t, table, limiter.WithClock(clock.Now))
	s := limiter.ShardedBucket{Key: "bk#cred-hot#rates", Limit: limiter.PerSecond(2, 2), Shards: 2} // each shard 1/s, burst 1
	shards, err := s.Buckets()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 6 { // shard 0 booked 6 s ahead
		if _, err := w.Reserve(ctx, shards[0], 1, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		earliest := time.Time{}
		for _, sh := range shards {
			st, err := w.State(ctx, sh)
			if err != nil {
				t.Fatal(err)
			}
			// slot = max(tat, now) + T − τ; T = τ = 1s for these shards.
			slot := clock.Now()
			if st.TAT.After(slot) {
				slot = st.TAT
			}
			if earliest.IsZero() || slot.Before(earliest) {
				earliest = slot
			}
		}
		r, err := w.ReserveSharded(ctx, s, 1, 10*time.Second)
		if err != nil {
			t.Fatalf("reservation %d: %v", i, err)
		}
		if !r.Slot.Equal(earliest) {
			t.Fatalf("reservation %d on %q at +%v, the earliest slot among shards is +%v", i, r.Key, r.Slot.Sub(t0), earliest.Sub(t0))
		}
	}
}

// CreateTable reports TTL enabled on another attribute instead of
// swallowing it, and accepts its own TTL.
func TestCreateTableReportsAForeignTTL(t *testing.T) {
	t.Parallel()
	db := emulator.DynamoDB(t)
	table := emulator.NewTable(t, db) // created, TTL on limiter.TTLAttribute
	ctx := context.Background()
	if err := limiter.CreateTable(ctx, db, table); err != nil {
		t.Fatalf("CreateTable on its own table = %v, want nil", err)
	}
	_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := limiter.CreateTable(ctx, db, table); !errors.Is(err, limiter.ErrTTLConflict) {
		t.Fatalf("CreateTable with TTL on another attribute = %v, want ErrTTLConflict", err)
	}
}

// sortedCounts renders a histogram for a log line.
func sortedCounts(m map[int64]int) string {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	out := ""
	for _, k := range keys {
		out += fmt.Sprintf(" %d:%d", k, m[k])
	}
	return out
}
