package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// txCounter counts every call, transactions included, on a real client.
type txCounter struct {
	db    *dynamodb.Client
	calls atomic.Int64
	txs   atomic.Int64
	// refused counts the UpdateItems DynamoDB answered with a failed
	// condition: the denials and form switches that reached the store.
	refused atomic.Int64
	// dropped counts UpdateItems whose answer never arrived (the emulator's
	// connection closed under the read): the limiter sends each again, and
	// that write's failed condition shows it its own grant.
	dropped atomic.Int64
}

func (c *txCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.calls.Add(1)
	out, err := c.db.UpdateItem(ctx, in, opts...)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		c.refused.Add(1)
	}
	var api smithy.APIError
	if err != nil && !errors.As(err, &api) {
		c.dropped.Add(1)
	}
	return out, err
}

func (c *txCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.calls.Add(1)
	return c.db.GetItem(ctx, in, opts...)
}

func (c *txCounter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.calls.Add(1)
	c.txs.Add(1)
	return c.db.TransactWriteItems(ctx, in, opts...)
}

// txWorker is a worker whose client can run transactions.
type txWorker struct {
	*limiter.Limiter
	c *txCounter
}

func newTxWorker(t *testing.T, table string, opts ...limiter.Option) txWorker {
	t.Helper()
	c := &txCounter{db: emulator.DynamoDB(t)}
	l, err := limiter.New(c, append([]limiter.Option{limiter.WithTable(table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return txWorker{l, c}
}

func tokens(t *testing.T, w txWorker, b limiter.Bucket) int {
	t.Helper()
	s, err := w.State(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return s.Tokens
}

// A multi-bucket take is all or nothing, its denial carries the exact wait
// of the slowest denying bucket, and a stale view costs one extra
// transaction, never a read.
func TestMultiTakeAllOrNothing(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	tests := []struct {
		name   string
		limits []limiter.Limit
		pre    []int // tokens taken from each bucket alone first
		// want: granted, or denied by bucket wantKey after wantWait
		granted  bool
		wantKey  int
		wantWait time.Duration
		calls    int64 // calls of the fresh worker's TakeMulti
		after    []int // tokens left in each bucket
	}{
		{"every bucket grants", []limiter.Limit{limiter.PerSecond(1, 5), limiter.PerSecond(1, 2)}, []int{0, 0},
			true, 0, 0, 1, []int{4, 1}},
		{"one denies, none charged", []limiter.Limit{limiter.PerSecond(1, 5), limiter.PerSecond(1, 2)}, []int{0, 2},
			false, 1, time.Second, 1, []int{5, 0}},
		{"two deny, the longest wait wins", []limiter.Limit{limiter.PerSecond(2, 1), limiter.PerSecond(1, 1), limiter.PerSecond(10, 10)}, []int{1, 1, 0},
			false, 1, time.Second, 1, []int{0, 0, 10}},
		{"stale idle form retried as busy", []limiter.Limit{limiter.PerSecond(10, 10), limiter.PerSecond(10, 10)}, []int{3, 0},
			true, 0, 0, 2, []int{6, 9}},
		{"per-second and per-minute of one credential", []limiter.Limit{limiter.PerSecond(10, 10), limiter.PerMinute(30, 3)}, []int{0, 3},
			false, 1, 2 * time.Second, 1, []int{10, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock()
			ctx := context.Background()
			buckets := make([]limiter.Bucket, len(tt.limits))
			for i, l := range tt.limits {
				buckets[i] = limiter.Bucket{Key: fmt.Sprintf("%s#%d", tt.name, i), Limit: l}
			}
			setup := newTxWorker(t, table, limiter.WithClock(clock.Now))
			for i, k := range tt.pre {
				if k > 0 {
					if _, err := setup.Take(ctx, buckets[i], k); err != nil {
						t.Fatal(err)
					}
				}
			}
			w := newTxWorker(t, table, limiter.WithClock(clock.Now)) // knows nothing
			r, err := w.TakeMulti(ctx, buckets, 1)
			if got := w.c.calls.Load(); got != tt.calls {
				t.Errorf("TakeMulti cost %d calls, want %d", got, tt.calls)
			}
			if tt.granted && (err != nil || !r.Slot.Equal(clock.Now()) || len(r.Keys) != len(buckets)) {
				t.Fatalf("TakeMulti = %+v, %v; want a grant at now", r, err)
			}
			var ex *limiter.ExhaustedError
			if !tt.granted && (!errors.As(err, &ex) || ex.Key != buckets[tt.wantKey].Key || ex.RetryAfter != tt.wantWait) {
				t.Fatalf("TakeMulti = %v; want a denial by %q after %v", err, buckets[tt.wantKey].Key, tt.wantWait)
			}
			for i, b := range buckets {
				if got := tokens(t, w, b); got != tt.after[i] {
					t.Errorf("bucket %d has %d tokens, want %d", i, got, tt.after[i])
				}
			}
			if tt.granted {
				return
			}
			// Denied again from what the cancellation taught: no call.
			before := w.c.calls.Load()
			if _, err := w.TakeMulti(ctx, buckets, 1); !errors.Is(err, limiter.ErrExhausted) || w.c.calls.Load() != before {
				t.Fatalf("repeat: %v after %d calls, want a local denial", err, w.c.calls.Load()-before)
			}
			// Exact: one microsecond early is still denied, on time granted.
			clock.Advance(tt.wantWait - time.Microsecond)
			if _, err := w.TakeMulti(ctx, buckets, 1); !errors.Is(err, limiter.ErrExhausted) {
				t.Fatalf("1µs before RetryAfter: %v, want denied", err)
			}
			clock.Advance(time.Microsecond)
			if _, err := w.TakeMulti(ctx, buckets, 1); err != nil {
				t.Fatalf("at RetryAfter: %v, want granted", err)
			}
		})
	}
}

// A reservation across buckets gets the latest of their slots, and every
// bucket is charged for it at that slot: the credential's tat moves to one
// interval past each common slot, not past the call's now.
func TestMultiReserveCommonSlot(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	t0 := clock.Now()
	ctx := context.Background()
	property := limiter.Bucket{Key: "bk#cred#rates#hotel-1", Limit: limiter.PerSecond(1, 1)}
	credential := limiter.Bucket{Key: "bk#cred#rates", Limit: limiter.PerSecond(10, 10)}
	both := []limiter.Bucket{credential, property}
	w := newTxWorker(t, table, limiter.WithClock(clock.Now))
	steps := []struct {
		maxDelay time.Duration
		slot     time.Duration // after t0; <0: denied
		wait     time.Duration
		credTAT  time.Duration // after t0
	}{
		{0, 0, 0, 100 * time.Millisecond},
		{5 * time.Second, time.Second, 0, 1100 * time.Millisecond},
		{5 * time.Second, 2 * time.Second, 0, 2100 * time.Millisecond},
		{1500 * time.Millisecond, -1, 1500 * time.Millisecond, 2100 * time.Millisecond},
		{3 * time.Second, 3 * time.Second, 0, 3100 * time.Millisecond},
	}
	for i, s := range steps {
		r, err := w.ReserveMulti(ctx, both, 1, s.maxDelay)
		if s.slot < 0 {
			if wait, ok := limiter.RetryAfter(err); !ok || wait != s.wait {
				t.Fatalf("step %d: %v, want denied for %v", i, err, s.wait)
			}
		} else if err != nil || !r.Slot.Equal(t0.Add(s.slot)) || r.Binding != property.Key && s.slot > 0 {
			t.Fatalf("step %d: %+v, %v; want slot t0+%v bound by the property", i, r, err, s.slot)
		}
		st, err := w.State(ctx, credential)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.TAT.Sub(t0); got != s.credTAT {
			t.Fatalf("step %d: the credential's tat is t0+%v, want t0+%v (charged at the common slot)", i, got, s.credTAT)
		}
	}
	// A second worker with no view of either bucket still lands after them.
	w2 := newTxWorker(t, table, limiter.WithClock(clock.Now))
	r, err := w2.ReserveMulti(ctx, both, 1, 10*time.Second)
	if err != nil || !r.Slot.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("fresh worker: %+v, %v; want slot t0+4s", r, err)
	}
	t.Logf("fresh worker booked t0+4s with %d transactions", w2.c.txs.Load())
}

// Many workers at once on a fresh pair: exactly the smaller burst is
// granted, and the larger bucket is charged only for those grants.
func TestMultiAtomicityConcurrent(t *testing.T) {
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	small := limiter.Bucket{Key: "bk#cred-1#availability#hotel-1", Limit: limiter.PerMinute(1, 10)}
	large := limiter.Bucket{Key: "bk#cred-1#availability", Limit: limiter.PerMinute(1, 30)}
	const takers = 60
	ws := make([]txWorker, takers)
	for i := range ws {
		ws[i] = newTxWorker(t, table)
	}
	granted, denied := stampede(t, takers, func(i int) error {
		_, err := ws[i].TakeMulti(context.Background(), []limiter.Bucket{small, large}, 1)
		return err
	})
	left := tokens(t, ws[0], large)
	t.Logf("%d takers: %d granted, %d denied; large bucket left with %d of 30", takers, granted, denied, left)
	if granted != 10 || left != 20 {
		t.Fatalf("granted %d (want 10), large bucket has %d tokens (want 20)", granted, left)
	}
}

func TestMultiStoreErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	buckets := []limiter.Bucket{{Key: "a", Limit: limiter.PerSecond(1, 1)}, {Key: "b", Limit: limiter.PerSecond(1, 1)}}
	t.Run("table not found", func(t *testing.T) {
		w := newTxWorker(t, "no-such-table-multi")
		_, err := w.TakeMulti(ctx, buckets, 1)
		if !errors.Is(err, limiter.ErrTableNotFound) {
			t.Fatalf("TakeMulti = %v, want ErrTableNotFound", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		c := &txCounter{db: emulator.DynamoDBAt(t, "http://127.0.0.1:1")}
		l, err := limiter.New(c, limiter.WithMaxAttempts(2))
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.TakeMulti(ctx, buckets, 1)
		// WithMaxAttempts(2), plus one for the second bucket.
		if !errors.Is(err, limiter.ErrUnavailable) || c.calls.Load() != 3 {
			t.Fatalf("TakeMulti = %v after %d calls, want ErrUnavailable after 3", err, c.calls.Load())
		}
	})
}

// Sharding splits the burst exactly, falls back to the other shards when
// the picked one is empty (from the denial cache: no call), and denies only
// when all are empty, with the wait of the first to refill.
func TestShardedSplitAndFallback(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	tests := []struct {
		limit  limiter.Limit
		shards int
		bursts []int
		wait   time.Duration
	}{
		{limiter.PerSecond(3, 7), 3, []int{3, 2, 2}, time.Second},
		{limiter.PerSecond(40, 20), 4, []int{5, 5, 5, 5}, 100 * time.Millisecond},
		{limiter.PerSecond(10, 10), 1, []int{10}, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("rate %v burst %d over %d", tt.limit.Rate, tt.limit.Burst, tt.shards), func(t *testing.T) {
			clock := newClock()
			w := newTxWorker(t, table, limiter.WithClock(clock.Now))
			s := limiter.ShardedBucket{Key: fmt.Sprintf("hot#%d#%d", tt.shards, tt.limit.Burst), Limit: tt.limit, Shards: tt.shards}
			got := map[string]int{}
			for range tt.limit.Burst {
				r, err := w.TakeSharded(context.Background(), s, 1)
				if err != nil {
					t.Fatalf("after %v grants: %v", got, err)
				}
				got[r.Key]++
			}
			shards, _ := s.Buckets()
			for i, b := range shards {
				if got[b.Key] != tt.bursts[i] {
					t.Errorf("shard %s granted %d, want its burst %d", b.Key, got[b.Key], tt.bursts[i])
				}
			}
			// Every fallback is answered from the denial cache: one call per
			// grant. A write whose answer the emulator dropped (its
			// connection closed under the read, seen under -race on a loaded
			// machine) costs one more call, which DynamoDB refuses because
			// it carries the call's own tag: that is the lost-answer
			// recovery, not a fallback reaching the store.
			calls, refused, dropped := w.c.calls.Load(), w.c.refused.Load(), w.c.dropped.Load()
			if calls != int64(tt.limit.Burst)+dropped || refused != dropped {
				t.Errorf("%d grants cost %d calls (%d refused, %d answers dropped), want one each plus one per dropped answer (fallbacks answered from the cache)", tt.limit.Burst, calls, refused, dropped)
			}
			_, err := w.TakeSharded(context.Background(), s, 1)
			var ex *limiter.ExhaustedError
			if !errors.As(err, &ex) || ex.Key != s.Key || ex.RetryAfter != tt.wait {
				t.Fatalf("with every shard empty: %v, want a denial on %q after %v", err, s.Key, tt.wait)
			}
		})
	}
}

// The fleet invariant holds over all shards together, on the store's
// conditional writes: 16 workers taking as fast as their denials allow
// from a bucket spread over 4 items.
func TestShardedFleetInvariant(t *testing.T) {
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	total := limiter.PerSecond(40, 20)
	s := limiter.ShardedBucket{Key: "expedia#cred-hot#ari", Limit: total, Shards: 4}
	var (
		mu     sync.Mutex
		grants []time.Time
		byKey  = map[string][]time.Time{}
		calls  atomic.Int64
	)
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(4*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for range 16 {
		w := newTxWorker(t, table)
		wg.Go(func() {
			defer func() { calls.Add(w.c.calls.Load()) }()
			for ctx.Err() == nil {
				r, err := w.TakeSharded(context.Background(), s, 1)
				if wait, denied := limiter.RetryAfter(err); denied {
					sleep(ctx, wait)
					continue
				}
				if err != nil {
					t.Errorf("TakeSharded: %v", err)
					return
				}
				mu.Lock()
				grants = append(grants, r.Slot)
				byKey[r.Key] = append(byKey[r.Key], r.Slot)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	assertFleetInvariant(t, grants, total, 0)
	shards, _ := s.Buckets()
	for _, b := range shards {
		assertFleetInvariant(t, byKey[b.Key], b.Limit, 0)
	}
	util := float64(len(grants)) / (float64(total.Burst) + total.Rate*elapsed.Seconds())
	t.Logf("4 shards, 16 workers: %d grants in %v, utilization %.1f%% of burst + rate·T, %.2f calls per grant",
		len(grants), elapsed.Round(time.Millisecond), util*100, float64(calls.Load())/float64(len(grants)))
	// Utilization (97% on a quiet machine, 53% on a loaded one) measures
	// the machine as much as the fleet: its floor is asserted in simulated
	// time, test/sim TestShardedFleetKeepsTheBucketBusy.
}

// Limits travel with each call. A greedy consumer on a manual clock takes
// whenever it may (jumping the clock by each exact RetryAfter); at tChange
// the limit changes. From tChange on, grants obey the new limit: lowering
// takes effect within one new emission interval, and raising never grants
// more than the new burst at once. Run with Take, and with TakeMulti
// beside a roomy second bucket.
func TestLimitChangesTakeEffectAtOnce(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	tests := []struct {
		name     string
		old, new limiter.Limit
		idle     time.Duration // pause before the change
	}{
		{"lower while saturated", limiter.PerSecond(10, 10), limiter.PerSecond(2, 2), 0},
		{"lower burst only", limiter.PerSecond(10, 10), limiter.PerSecond(10, 3), 0},
		{"raise while saturated", limiter.PerSecond(2, 2), limiter.PerSecond(20, 20), 0},
		{"raise after idle", limiter.PerSecond(2, 2), limiter.PerSecond(20, 20), 2 * time.Second},
	}
	for _, multi := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s multi=%v", tt.name, multi), func(t *testing.T) {
				clock := newClock()
				ctx := context.Background()
				w := newTxWorker(t, table, limiter.WithClock(clock.Now))
				key := fmt.Sprintf("change#%s#%v", tt.name, multi)
				take := func(lim limiter.Limit) (time.Time, error) {
					b := limiter.Bucket{Key: key, Limit: lim}
					if !multi {
						r, err := w.Take(ctx, b, 1)
						return r.Slot, err
					}
					r, err := w.TakeMulti(ctx, []limiter.Bucket{b, {Key: key + "#roomy", Limit: limiter.PerSecond(1000, 1000)}}, 1)
					return r.Slot, err
				}
				t0 := clock.Now()
				// 1.5 s saturates the old bucket (its burst is gone within
				// the first second); 2.5 s under the new limit is five of its
				// slowest intervals, past any backlog the old burst leaves.
				stopOld, tChange := t0.Add(1500*time.Millisecond), t0.Add(1500*time.Millisecond+tt.idle)
				end := tChange.Add(2500 * time.Millisecond)
				var after []time.Time
				lastOld := time.Time{}
				for clock.Now().Before(end) {
					now := clock.Now()
					if !now.Before(stopOld) && now.Before(tChange) {
						clock.Set(tChange)
						continue
					}
					lim, limitAt := tt.old, stopOld
					if !now.Before(tChange) {
						lim, limitAt = tt.new, end
					}
					slot, err := take(lim)
					if wait, denied := limiter.RetryAfter(err); denied {
						clock.Set(minTime(now.Add(wait), limitAt))
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					if now.Before(tChange) {
						lastOld = slot
					} else {
						after = append(after, slot)
					}
				}
				assertFleetInvariant(t, after, tt.new, 0)
				first := after[0].Sub(tChange)
				atOnce := 0
				for _, g := range after {
					if g.Equal(after[0]) {
						atOnce++
					}
				}
				ideal := float64(tt.new.Burst) + tt.new.Rate*end.Sub(tChange).Seconds()
				t.Logf("last old grant %v before the change; first new grant %v after it (new interval %v); %d granted at that instant (new burst %d); %d grants in %v (bound %.0f)",
					tChange.Sub(lastOld), first, time.Duration(tt.new.Interval())*time.Microsecond, atOnce, tt.new.Burst, len(after), end.Sub(tChange), ideal)
				// The new limit holds from the change (the invariant above).
				// The first grant under it comes within one new interval,
				// unless the old burst booked more than the new one allows:
				// that excess is paid back first, never forgiven.
				backlog := time.Duration(max(tt.old.Tolerance()-tt.new.Tolerance(), 0)) * time.Microsecond
				if interval := time.Duration(tt.new.Interval()) * time.Microsecond; first > interval+backlog {
					t.Errorf("first grant under the new limit %v after the change, want within one new interval %v (+ %v backlog)", first, interval, backlog)
				}
				if atOnce > tt.new.Burst {
					t.Errorf("%d grants at once, above the new burst %d", atOnce, tt.new.Burst)
				}
				if float64(len(after)) < 0.9*tt.new.Rate*end.Sub(after[0]).Seconds() {
					t.Errorf("%d grants in %v under rate %v: the new rate is not used", len(after), end.Sub(after[0]), tt.new.Rate)
				}
			})
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// A reservation across buckets is spent at its common slot, so every
// bucket must be charged there, not at the call's now: a bucket whose own
// slot is earlier (an extra window beside a per-second limit emptied by a
// 429) and that was charged at now would see its tokens spent late, all at
// the binding bucket's pace. The vendor counts each window at arrival: the
// slots must keep burst + rate·W in every bucket's window, by package
// window (the mock OTA's check, no code shared with sdk/gcra). Adversary
// seed 20 (limits, halving): 5 sends in 796 ms past a window of 2.5/s,
// burst 2.
func TestMultiReserveChargesEveryBucketAtTheCommonSlot(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	t0 := clock.Now()
	ctx := context.Background()
	second := limiter.Bucket{Key: "ex#cred#rates", Limit: withMargin(limiter.PerSecond(5, 1), 100*time.Millisecond)}
	minute := limiter.Bucket{Key: "ex#cred#rates#w0", Limit: withMargin(limiter.PerMinute(150, 2), 100*time.Millisecond)}
	w := newTxWorker(t, table, limiter.WithClock(clock.Now))
	// The vendor's 429: the per-second bucket is empty for a second, the
	// per-minute one untouched.
	if err := w.Penalize(ctx, second, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	var slots []time.Time
	for i := range 10 {
		r, err := w.ReserveMulti(ctx, []limiter.Bucket{second, minute}, 1, 10*time.Second)
		if err != nil {
			t.Fatalf("reservation %d: %v", i, err)
		}
		slots = append(slots, r.Slot)
	}
	for _, b := range []limiter.Bucket{second, minute} {
		wl := window.Limit{Rate: b.Limit.Rate, Burst: b.Limit.Burst}
		if w, broken := window.Fullest(slots, wl); broken {
			t.Errorf("%s: the common slots break its window burst %d + rate %g·W: %v (slots %v after t0)", b.Key, wl.Burst, wl.Rate, w, since(t0, slots))
		}
	}
}

func since(t0 time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(t0)
	}
	return out
}

func withMargin(l limiter.Limit, m time.Duration) limiter.Limit {
	l.Margin = m
	return l
}
