package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// A fleet that hammers one bucket (20/s, burst 40) for 5 s keeps it busy
// and never over-grants: grants reach at least 95% of burst + rate·T when
// the workers reserve (Wait) and 80% when they take and retry after each
// denial (every denied worker wakes at once), and no window of grants
// holds more than burst + rate·W (package window, which shares no code
// with sdk/gcra). The emulator suite checks the invariant against moto's
// conditional writes (TestFleetInvariant); the utilization is measured
// here, in simulated time, at moto's latency and at DynamoDB's, where no
// other process on the machine can starve the fleet of its CPU.
func TestFleetKeepsTheBucketBusy(t *testing.T) {
	const d = 5 * time.Second
	lim := limiter.PerSecond(20, 40)
	for _, store := range []struct {
		name string
		lat  Latency
	}{
		{"moto", Latency{P50: 52 * time.Millisecond, P99: 170 * time.Millisecond}},
		{"DynamoDB", Latency{P50: 5 * time.Millisecond, P99: 25 * time.Millisecond}},
	} {
		for _, n := range []int{4, 40} {
			for _, wait := range []bool{false, true} {
				mode, floor := "take-retry", 0.80
				if wait {
					mode, floor = "wait", 0.95
				}
				t.Run(fmt.Sprintf("%s %d workers %s", store.name, n, mode), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						grants, calls := hammerMem(t, store.lat, n, d, lim, wait)
						w, broken := window.Fullest(grants, window.Limit{Rate: lim.Rate, Burst: lim.Burst})
						if broken {
							t.Fatalf("grants exceed burst %d + rate %v × window: %v", lim.Burst, lim.Rate, w)
						}
						ideal := float64(lim.Burst) + lim.Rate*d.Seconds()
						util := float64(len(grants)) / ideal
						t.Logf("%d grants in %v, utilization %.1f%% of burst + rate·T, %.2f store calls per grant; fullest window %.1f%% of its bound",
							len(grants), d, util*100, float64(calls)/float64(len(grants)), w.Ratio()*100)
						if util < floor {
							t.Errorf("utilization %.1f%% < %.0f%%", util*100, floor*100)
						}
						// grants ≤ burst + rate·T, plus rounding (ε = 1%).
						if util > 1.01 {
							t.Errorf("utilization %.1f%% > 101%%: the fleet over-granted", util*100)
						}
						// A waiter books once and sleeps; at most a lost race
						// and a silence read more. Waiters that spin on denials
						// of a few µs (a check that makes every grant late, so
						// that each is booked again) cost far more calls.
						if perGrant := float64(calls) / float64(len(grants)); wait && perGrant > 3 {
							t.Errorf("%.2f store calls per grant with Wait, want at most 3: waiters spin", perGrant)
						}
					})
				})
			}
		}
	}
}

// hammerMem runs n workers, each its own limiter, on one bucket of an
// in-memory store answering at lat, for d of simulated time, and returns
// the grants' slots and the store calls made.
func hammerMem(t *testing.T, lat Latency, n int, d time.Duration, lim limiter.Limit, wait bool) ([]time.Time, int) {
	db := NewDB(rand.New(rand.NewPCG(7, uint64(n))), lat)
	if err := limiter.CreateTable(context.Background(), db, "limits"); err != nil {
		t.Fatal(err)
	}
	b := limiter.Bucket{Key: "expedia#cred-9#ari", Limit: lim}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu     sync.Mutex
		grants []time.Time
		wg     sync.WaitGroup
	)
	for range n {
		l, err := limiter.New(db, limiter.WithTable("limits"))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				var r limiter.Reservation
				var err error
				if wait {
					r, err = l.Wait(ctx, b, 1, 2*time.Second)
				} else {
					r, err = l.Take(ctx, b, 1)
				}
				if retry, denied := limiter.RetryAfter(err); denied {
					_ = sleep(ctx, retry)
					continue
				}
				if err != nil {
					// Wait refuses a wait past ctx's deadline a moment
					// before ctx itself reports it.
					if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("worker: %v", err)
					}
					return
				}
				mu.Lock()
				grants = append(grants, r.Slot)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	calls := 0
	for _, c := range db.Stats().Calls {
		calls += c
	}
	return grants, calls
}

// The same over a bucket spread on 4 shards (40/s, burst 20), 16 workers
// taking and retrying after each denial, each worker sleeping its
// denial's wait: at least 60% of burst + rate·T, and no window of all the
// shards' grants together over burst + rate·W. TestShardedFleetInvariant
// checks the invariant on the emulator.
func TestShardedFleetKeepsTheBucketBusy(t *testing.T) {
	const d = 4 * time.Second
	total := limiter.PerSecond(40, 20)
	s := limiter.ShardedBucket{Key: "expedia#cred-hot#ari", Limit: total, Shards: 4}
	for _, store := range []struct {
		name string
		lat  Latency
	}{
		{"moto", Latency{P50: 52 * time.Millisecond, P99: 170 * time.Millisecond}},
		{"DynamoDB", Latency{P50: 5 * time.Millisecond, P99: 25 * time.Millisecond}},
	} {
		t.Run(store.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := NewDB(rand.New(rand.NewPCG(7, 16)), store.lat)
				if err := limiter.CreateTable(context.Background(), db, "limits"); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				var (
					mu     sync.Mutex
					grants []time.Time
					wg     sync.WaitGroup
				)
				for range 16 {
					l, err := limiter.New(db, limiter.WithTable("limits"))
					if err != nil {
						t.Fatal(err)
					}
					wg.Go(func() {
						for ctx.Err() == nil {
							r, err := l.TakeSharded(context.Background(), s, 1)
							if wait, denied := limiter.RetryAfter(err); denied {
								_ = sleep(ctx, wait)
								continue
							}
							if err != nil {
								t.Errorf("TakeSharded: %v", err)
								return
							}
							mu.Lock()
							grants = append(grants, r.Slot)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				w, broken := window.Fullest(grants, window.Limit{Rate: total.Rate, Burst: total.Burst})
				if broken {
					t.Fatalf("grants exceed burst %d + rate %v × window: %v", total.Burst, total.Rate, w)
				}
				util := float64(len(grants)) / (float64(total.Burst) + total.Rate*d.Seconds())
				t.Logf("4 shards, 16 workers: %d grants in %v, utilization %.1f%% of burst + rate·T", len(grants), d, util*100)
				if util < 0.6 {
					t.Errorf("utilization %.1f%% < 60%%", util*100)
				}
			})
		})
	}
}
