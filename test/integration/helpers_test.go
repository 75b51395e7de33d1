package integration

import (
	"context"
	"errors"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// newClock is the tests' shared fake clock, limitertest's, from noon of
// 2026-11-30: time moves only when the test says.
func newClock() *limitertest.Clock {
	return limitertest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
}

// worker is one simulated process: its own client, its own Limiter, so it
// shares nothing with other workers but the table.
type worker struct {
	*limiter.Limiter
	calls *dynamotest.Counter
}

func newWorker(t *testing.T, table string, opts ...limiter.Option) worker {
	t.Helper()
	c := &dynamotest.Counter{DB: emulator.DynamoDB(t)}
	l, err := limiter.New(c, append([]limiter.Option{limiter.WithTable(table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return worker{l, c}
}

// adaptiveFleet is the adaptive tests' set-up: a fresh table, a manual
// clock from t0, and a bucket of 20/s with the given burst that adapts
// (down to 1/s; after 10 s without a throttle, up 1/s every second).
type adaptiveFleet struct {
	table string
	clock *limitertest.Clock
	t0    time.Time
	b     limiter.Bucket
}

func newAdaptiveFleet(t *testing.T, db *dynamodb.Client, key string, burst int) adaptiveFleet {
	t.Helper()
	clock := newClock()
	return adaptiveFleet{table: emulator.NewTable(t, db), clock: clock, t0: clock.Now(),
		b: limiter.Bucket{Key: key, Limit: limiter.PerSecond(20, burst),
			Adaptive: &limiter.Adaptive{MinRate: 1, Quiet: 10 * time.Second, Increase: 1}}}
}

// worker is one more process on the fleet's table and clock.
func (f adaptiveFleet) worker(t *testing.T) worker {
	t.Helper()
	return newWorker(t, f.table, limiter.WithClock(f.clock.Now))
}

// at sets the clock to t0 + d.
func (f adaptiveFleet) at(d time.Duration) { f.clock.Set(f.t0.Add(d)) }

// assertFleetInvariant checks that in every window [a, b] of grant times the
// grants number at most burst + rate·(b − a + slack), by package window (the
// mock OTA's check, which shares no code with sdk/gcra). The rate·slack
// extra grants are whole ones, rounded up: exact for TestClockSkew's
// 20/s × 200 ms. It sorts grants in place; callers read the first and last.
func assertFleetInvariant(t *testing.T, grants []time.Time, lim limiter.Limit, slack time.Duration) {
	t.Helper()
	sort.Slice(grants, func(i, j int) bool { return grants[i].Before(grants[j]) })
	wl := window.Limit{Rate: lim.Rate, Burst: lim.Burst + int(math.Ceil(lim.Rate*slack.Seconds()-1e-9))}
	w, broken := window.Fullest(grants, wl)
	if broken {
		t.Fatalf("grants exceed burst %d + rate %v × (window + %v): %v", lim.Burst, lim.Rate, slack, w)
	}
	t.Logf("%d grants; fullest window used %.1f%% of its bound", len(grants), w.Ratio()*100)
}

// stampede releases n takers at the same instant and counts the grants and
// the denials; any other outcome fails the test.
func stampede(t *testing.T, n int, take func(i int) error) (granted, denied int64) {
	t.Helper()
	var g, d atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			switch err := take(i); {
			case err == nil:
				g.Add(1)
			case errors.Is(err, limiter.ErrExhausted):
				d.Add(1)
			default:
				t.Errorf("taker %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return g.Load(), d.Load()
}

// stampOf is r's stamp, as Throttle takes it.
func stampOf(r limiter.Reservation) *limiter.Stamp {
	s, _ := r.Stamp()
	return &s
}

// takeAt takes one token of b from w at the clock's now and fails the
// test unless the answer is the one wanted: granted for want 0, refused
// with exactly that retry-after otherwise. name and t0 say where in the
// test's story it happened.
func takeAt(t *testing.T, w worker, b limiter.Bucket, clock *limitertest.Clock, t0 time.Time, name string, want time.Duration) {
	t.Helper()
	_, err := w.Take(context.Background(), b, 1)
	if wait, denied := limiter.RetryAfter(err); want > 0 && (!denied || wait != want) || want == 0 && err != nil {
		t.Fatalf("%s: take at t0+%v = %v, want retry-after %v (0: granted)", name, clock.Now().Sub(t0), err, want)
	}
}

// TestMain sweeps, on an endpoint the user brings, whatever the tests left
// under the run's prefix (see emulator.Main).
func TestMain(m *testing.M) { os.Exit(emulator.Main(m)) }
