package benchcompare

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

var (
	fleetDuration = flag.Duration("fleet.duration", 5*time.Second, "how long each contended fleet runs")
	soloDuration  = flag.Duration("solo.duration", 2*time.Second, "how long each uncontended worker runs")
)

// contendedLimit is the measuring limit of docs/benchmarks.md: rate 20/s, burst 40.
var contendedLimit = limiter.PerSecond(20, 40)

// soloLimit never runs dry: every call of an uncontended worker is a grant,
// so what it costs is the price of a grant and nothing else.
var soloLimit = limiter.PerSecond(1e6, 1_000_000)

// approach names one way of taking tokens.
type approach struct {
	name string
	// contendedOnly: not worth an uncontended run (it costs what "common"
	// costs there).
	contendedOnly bool
	// taker builds one worker: its own client (metered by m) and its own
	// limiter instance.
	taker func(b *testing.B, m *benchkit.Meter, table string, l limiter.Limit) benchkit.Taker
}

var approaches = []approach{
	{"fleetbucket-wait", false, func(b *testing.B, m *benchkit.Meter, table string, l limiter.Limit) benchkit.Taker {
		return benchkit.SDKWait(sdkLimiter(b, m, table), limiter.Bucket{Key: "bench#sdk", Limit: l}, 2*time.Second)
	}},
	{"fleetbucket-take", false, func(b *testing.B, m *benchkit.Meter, table string, l limiter.Limit) benchkit.Taker {
		return benchkit.SDKTake(sdkLimiter(b, m, table), limiter.Bucket{Key: "bench#sdk", Limit: l})
	}},
	{"common", false, func(b *testing.B, m *benchkit.Meter, table string, l limiter.Limit) benchkit.Taker {
		return CommonTaker(meteredClient(b, m), table, "bench#common", l, true)
	}},
	// The same library with its race check off: GetItem, then an
	// unconditional PutItem, which is what "no lock" means for it.
	{"common-unguarded", true, func(b *testing.B, m *benchkit.Meter, table string, l limiter.Limit) benchkit.Taker {
		return CommonTaker(meteredClient(b, m), table, "bench#common-unguarded", l, false)
	}},
}

func meteredClient(b *testing.B, m *benchkit.Meter) *dynamodb.Client {
	return dynamodb.NewFromConfig(emulator.Config(b), m.Option(), benchkit.ForEmulator)
}

func sdkLimiter(b *testing.B, m *benchkit.Meter, table string) *limiter.Limiter {
	l, err := limiter.New(meteredClient(b, m), limiter.WithTable(table))
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkCommonApproach: DynamoDB requests and billed capacity per
// granted token, for fleetbucket (Wait: reserve, then sleep; Take, retried
// after its RetryAfter) and the common read-then-conditional-write bucket
// (mennanov/limiters, retried after its wait, or at once after a lost
// race), on one key:
//
//   - workers=1: one worker on a bucket that never runs dry, for
//     -solo.duration;
//   - workers=16: sixteen workers, each with its own client and limiter,
//     on one bucket of rate 20/s and burst 40, for -fleet.duration; also
//     grants ÷ (burst + rate·T), which must stay ≤ 1, and the fullest
//     window's grants ÷ its bound. "common-unguarded" is the same library
//     with its race check off (an unconditional PutItem), what "without a
//     lock" means there.
//
// Run with -benchtime 1x: each is a fixed-time scenario.
func BenchmarkCommonApproach(b *testing.B) {
	for _, workers := range []int{1, 16} {
		l, d := soloLimit, *soloDuration
		if workers > 1 {
			l, d = contendedLimit, *fleetDuration
		}
		for _, a := range approaches {
			if a.contendedOnly && workers == 1 {
				continue
			}
			b.Run(fmt.Sprintf("workers=%d/%s", workers, a.name), func(b *testing.B) {
				table := emulator.NewTable(b, emulator.DynamoDB(b))
				meter := &benchkit.Meter{}
				takers := make([]benchkit.Taker, workers)
				for i := range takers {
					takers[i] = a.taker(b, meter, table, l)
				}
				res := benchkit.RunFleet(context.Background(), takers, d)
				if res.Failures > 0 {
					b.Errorf("%d failed attempts, first: %v", res.Failures, res.FirstError)
				}
				for _, m := range benchkit.FleetMetrics(res, meter.Usage(), l) {
					b.ReportMetric(m.Value, m.Unit)
				}
				b.ReportMetric(float64(res.Conflicts)/float64(max(len(res.Grants), 1)), "conflicts/grant")
			})
		}
	}
}

// BenchmarkFreshBucket200: 200 workers, each with its own client and
// limiter, take one token each at the same instant from a bucket that does
// not exist yet (new, or expired by TTL) with burst 10 and a refill too
// slow to matter: exactly 10 may be granted. A worker that loses a race
// asks again until it is granted or denied.
func BenchmarkFreshBucket200(b *testing.B) {
	const takers = 200
	l := limiter.PerMinute(1, 10)
	for _, a := range approaches[1:] { // Wait and Take are the same call here
		b.Run(a.name, func(b *testing.B) {
			table := emulator.NewTable(b, emulator.DynamoDB(b))
			meter := &benchkit.Meter{}
			ts := make([]benchkit.Taker, takers)
			for i := range ts {
				ts[i] = a.taker(b, meter, table, l)
			}
			var (
				mu                        sync.Mutex
				granted, denied, conflict int
				firstErr                  error
				wg                        sync.WaitGroup
			)
			start := make(chan struct{})
			for _, take := range ts {
				wg.Go(func() {
					<-start
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					for {
						at := take(ctx)
						mu.Lock()
						switch at.Outcome {
						case benchkit.Conflict:
							conflict++
							mu.Unlock()
							continue
						case benchkit.Granted:
							granted++
						case benchkit.Denied:
							denied++
						default:
							if firstErr == nil {
								firstErr = at.Err
							}
						}
						mu.Unlock()
						return
					}
				})
			}
			close(start)
			wg.Wait()
			if firstErr != nil {
				b.Errorf("a take failed: %v", firstErr)
			}
			u := meter.Usage()
			b.ReportMetric(float64(granted), "grants")
			b.ReportMetric(float64(l.Burst), "allowed")
			b.ReportMetric(float64(granted)/float64(l.Burst), "grants/allowed")
			b.ReportMetric(float64(conflict), "conflicts")
			b.ReportMetric(float64(u.Requests)/takers, "req/take")
			b.ReportMetric(u.WCU/takers, "WCU/take")
			b.ReportMetric(0, "ns/op")
		})
	}
}
