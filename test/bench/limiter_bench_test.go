// Package bench measures the limiter against the local emulator. Every
// number it reports is a ratio taken within one run, so it means the same
// on a fast laptop and a loaded CI machine:
//
//	go test -run '^$' -bench . ./test/bench/   (with the local stack up; scripts/bench.sh does it all)
package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// BenchmarkTakeUncontended: one worker, a bucket that never runs dry. Take
// is timed against a bare unconditional UpdateItem on another key,
// interleaved call by call so both see the same machine load.
func BenchmarkTakeUncontended(b *testing.B) {
	db := emulator.DynamoDB(b)
	table := emulator.NewTable(b, db)
	counter := &dynamotest.Counter{DB: db}
	l, err := limiter.New(counter, limiter.WithTable(table))
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
	b.ReportMetric(float64(counter.Calls())/float64(b.N), "calls/grant")
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

// BenchmarkContended16 runs 16 workers, each its own client and Limiter, on
// one saturated bucket until b.N tokens are granted; a worker waits for its
// slot with Wait, the limiter's answer to "no token yet".
func BenchmarkContended16(b *testing.B) {
	for _, mode := range []string{"wait", "take-retry"} {
		b.Run(mode, func(b *testing.B) { contended(b, 16, mode) })
	}
}

func contended(b *testing.B, workers int, mode string) {
	db := emulator.DynamoDB(b)
	table := emulator.NewTable(b, db)
	lim := limiter.PerSecond(100, 10)
	bucket := limiter.Bucket{Key: "bench#contended", Limit: lim}
	var granted, calls atomic.Int64
	target := int64(b.N)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		counter := &dynamotest.Counter{DB: emulator.DynamoDB(b)}
		l, err := limiter.New(counter, limiter.WithTable(table))
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer func() { calls.Add(counter.Calls()) }()
			ctx := context.Background()
			for granted.Load() < target {
				var err error
				if mode == "wait" {
					_, err = l.Wait(ctx, bucket, 1, time.Second)
				} else {
					_, err = l.Take(ctx, bucket, 1)
				}
				if wait, denied := limiter.RetryAfter(err); denied {
					time.Sleep(wait)
					continue
				}
				if err != nil {
					b.Error(err)
					return
				}
				granted.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	ideal := float64(lim.Burst) + lim.Rate*elapsed.Seconds()
	b.ReportMetric(float64(calls.Load())/float64(granted.Load()), "calls/grant")
	b.ReportMetric(float64(granted.Load())/ideal, "utilization")
	b.ReportMetric(0, "ns/op") // wall time is set by the bucket's rate, not by the code
}
