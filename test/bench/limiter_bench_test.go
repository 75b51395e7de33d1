// Package bench measures the limiter against the local emulator. Every
// number it reports is a ratio taken within one run, so it means the same
// on a fast laptop and a loaded CI machine. scripts/bench.sh runs these and
// the comparison with the common approach (test/benchcompare) and writes
// docs/bench/report.md; by hand, with the local stack up:
//
//	go test -run '^$' -bench 'TakeUncontended' -benchtime 300x ./test/bench/
//	go test -run '^$' -bench 'Contended16|Overload' -benchtime 1x ./test/bench/
//
// BenchmarkTakeUncontended is a classic b.N benchmark. The others are
// scenarios that run for a fixed time (-fleet.duration) whatever b.N is,
// and report ratios, so -benchtime 1x runs each once.
package bench

import (
	"context"
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

var fleetDuration = flag.Duration("fleet.duration", 5*time.Second, "how long each fleet scenario runs")

// BenchmarkTakeUncontended: one worker, a bucket that never runs dry. Take
// is timed against a bare unconditional UpdateItem on another key,
// interleaved call by call so both see the same machine load.
func BenchmarkTakeUncontended(b *testing.B) {
	table := emulator.NewTable(b, emulator.DynamoDB(b))
	db := dynamodb.NewFromConfig(emulator.Config(b), benchkit.ForEmulator)
	meter := &benchkit.Meter{}
	metered := dynamodb.NewFromConfig(emulator.Config(b), meter.Option(), benchkit.ForEmulator)
	l, err := limiter.New(metered, limiter.WithTable(table))
	if err != nil {
		b.Fatal(err)
	}
	bucket := limiter.Bucket{Key: "bench#uncontended", Limit: limiter.PerSecond(1e6, 1e6)}
	ctx := context.Background()
	var takeTime, bareTime time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if err := bareUpdate(ctx, db, table, i); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := l.Take(ctx, bucket, 1); err != nil {
			b.Fatal(err)
		}
		takeTime += time.Since(t1)
		bareTime += t1.Sub(t0)
	}
	u := meter.Usage()
	b.ReportMetric(float64(u.Requests)/float64(b.N), "req/grant")
	b.ReportMetric(u.WCU/float64(b.N), "WCU/grant")
	b.ReportMetric(float64(takeTime)/float64(bareTime), "take/bare-latency")
	b.ReportMetric(float64(takeTime.Microseconds())/float64(b.N), "take-µs")
	b.ReportMetric(float64(bareTime.Microseconds())/float64(b.N), "bare-µs")
}

// bareUpdate is the cheapest useful write: an unconditional counter bump.
func bareUpdate(ctx context.Context, db *dynamodb.Client, table string, i int) error {
	_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &table,
		Key:                       map[string]types.AttributeValue{limiter.KeyAttribute: &types.AttributeValueMemberS{Value: "bench#bare"}},
		UpdateExpression:          aws.String("SET v = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.Itoa(i)}},
	})
	return err
}

// contendedLimit is the measuring limit of docs/benchmarks.md: rate 20/s, burst 40.
var contendedLimit = limiter.PerSecond(20, 40)

// BenchmarkContended16 runs 16 workers, each its own client and Limiter, on
// one saturated bucket for -fleet.duration: "wait" reserves a slot and
// sleeps until it (limiter.Wait); "take-retry" takes and, when denied,
// sleeps the RetryAfter and takes again. test/benchcompare runs the same
// fleet beside the common read-then-write bucket.
func BenchmarkContended16(b *testing.B) {
	for _, mode := range []string{"wait", "take-retry"} {
		b.Run(mode, func(b *testing.B) {
			table := emulator.NewTable(b, emulator.DynamoDB(b))
			bucket := limiter.Bucket{Key: "bench#contended", Limit: contendedLimit}
			meter := &benchkit.Meter{}
			takers := make([]benchkit.Taker, 16)
			for i := range takers {
				l, err := limiter.New(dynamodb.NewFromConfig(emulator.Config(b), meter.Option(), benchkit.ForEmulator), limiter.WithTable(table))
				if err != nil {
					b.Fatal(err)
				}
				takers[i] = benchkit.SDKTake(l, bucket)
				if mode == "wait" {
					takers[i] = benchkit.SDKWait(l, bucket, 2*time.Second)
				}
			}
			res := benchkit.RunFleet(context.Background(), takers, *fleetDuration)
			if res.Failures > 0 {
				b.Errorf("%d failed attempts, first: %v", res.Failures, res.FirstError)
			}
			for _, m := range benchkit.FleetMetrics(res, meter.Usage(), contendedLimit) {
				b.ReportMetric(m.Value, m.Unit)
			}
		})
	}
}

// BenchmarkFleetWorkers runs 1, 16 and 40 workers, each its own client and
// Limiter, on one bucket (rate 20/s, burst 40) for -fleet.duration, with
// Take-and-retry and with Wait, and reports requests per grant and
// DynamoDB writes per limiter call (calls answered from the denial cache
// count as calls with no write).
//
//	go test -run '^$' -bench 'FleetWorkers' -benchtime 1x ./test/bench/
func BenchmarkFleetWorkers(b *testing.B) {
	for _, workers := range []int{1, 16, 40} {
		for _, mode := range []string{"take-retry", "wait"} {
			b.Run(strconv.Itoa(workers)+"/"+mode, func(b *testing.B) {
				table := emulator.NewTable(b, emulator.DynamoDB(b))
				bucket := limiter.Bucket{Key: "bench#fleet", Limit: contendedLimit}
				meter := &benchkit.Meter{}
				takers := make([]benchkit.Taker, workers)
				steady := make([]steadyCount, workers)
				for i := range takers {
					own := &benchkit.Meter{}
					l, err := limiter.New(dynamodb.NewFromConfig(emulator.Config(b), meter.Option(), own.Option(), benchkit.ForEmulator), limiter.WithTable(table))
					if err != nil {
						b.Fatal(err)
					}
					takers[i] = benchkit.SDKTake(l, bucket)
					if mode == "wait" {
						takers[i] = benchkit.SDKWait(l, bucket, 2*time.Second)
					}
					takers[i] = steady[i].count(takers[i], own)
				}
				res := benchkit.RunFleet(context.Background(), takers, *fleetDuration)
				if res.Failures > 0 {
					b.Errorf("%d failed attempts, first: %v", res.Failures, res.FirstError)
				}
				var st steadyCount
				for _, c := range steady {
					st.requests, st.grants = st.requests+c.requests, st.grants+c.grants
				}
				if st.grants > 0 && mode == "wait" {
					b.ReportMetric(float64(st.requests)/float64(st.grants), "req/grant-steady")
				}
				u := meter.Usage()
				for _, m := range benchkit.FleetMetrics(res, u, contendedLimit) {
					b.ReportMetric(m.Value, m.Unit)
				}
				if res.Attempts > 0 {
					b.ReportMetric(float64(u.Requests)/float64(res.Attempts), "writes/call")
				}
			})
		}
	}
}

// steadyCount counts one worker's requests and grants in steady state:
// grants after its first call (whose cache is cold) and before its first
// denial (with Wait, only the run's end denies: a reservation past the
// run's deadline, confirmed by a write when the worker's view is old).
type steadyCount struct {
	calls, requests, grants int64
	denied                  bool
}

func (c *steadyCount) count(take benchkit.Taker, own *benchkit.Meter) benchkit.Taker {
	return func(ctx context.Context) benchkit.Attempt {
		before := own.Usage().Requests
		a := take(ctx)
		c.calls++
		if a.Outcome != benchkit.Granted {
			c.denied = true
		}
		if a.Outcome == benchkit.Granted && c.calls > 1 && !c.denied {
			c.requests += own.Usage().Requests - before
			c.grants++
		}
		return a
	}
}
