package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// BenchmarkBatchReservation books b.N slots on one bucket in batches of 1,
// 10 and 100 and reports DynamoDB calls per slot. The target is at most
// 1/batch + 0.05: one write per batch, whatever its size.
func BenchmarkBatchReservation(b *testing.B) {
	db := emulator.DynamoDB(b)
	table := emulator.NewTable(b, db)
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			counter := &dynamotest.Counter{DB: db}
			l, err := limiter.New(counter, limiter.WithTable(table))
			if err != nil {
				b.Fatal(err)
			}
			// Fast enough that the bench measures calls, not waiting.
			bucket := limiter.Bucket{Key: fmt.Sprintf("bench#batch-%d", size), Limit: limiter.PerSecond(1e5, 100)}
			ctx := context.Background()
			slots := 0
			for slots < b.N {
				batch, err := l.ReserveBatch(ctx, bucket, limiter.BatchRequest{N: size, MaxDelay: time.Minute, Partial: true})
				if err != nil {
					b.Fatal(err)
				}
				slots += len(batch.Slots)
			}
			b.ReportMetric(float64(counter.Calls())/float64(slots), "calls/slot")
			b.ReportMetric(0, "ns/op")
		})
	}
}
