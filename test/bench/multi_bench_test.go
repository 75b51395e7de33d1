package bench

// Benchmarks of issue 6: what a multi-bucket grant costs against a
// single-bucket one, and what sharding a hot bucket does to the aggregate
// grant rate. They run on a private single-threaded moto (emulator.StartMoto)
// so other users of the local stack do not skew them:
//
//	go test -run '^$' -bench 'MultiCost' -benchtime 300x ./test/bench/
//	go test -run '^$' -bench 'MultiContended|ShardedThroughput' -benchtime 1x ./test/bench/

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// wcuMeter forwards to a real client and counts requests and the write
// units DynamoDB bills for them: 1 per UpdateItem (the limiter's items are
// far below 1 KB) and 2 per item of a TransactWriteItems (transactional
// writes cost twice). A failed condition or a cancelled transaction is
// counted at the same price as one that succeeded: DynamoDB bills a failed
// conditional write as a write, and the bench assumes the same of a
// cancelled transaction (the conservative reading).
type wcuMeter struct {
	db       *dynamodb.Client
	requests atomic.Int64
	wcu      atomic.Int64
	txs      atomic.Int64
}

func (m *wcuMeter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	m.requests.Add(1)
	m.wcu.Add(1)
	return m.db.UpdateItem(ctx, in, opts...)
}

func (m *wcuMeter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	m.requests.Add(1)
	return m.db.GetItem(ctx, in, opts...)
}

func (m *wcuMeter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	m.requests.Add(1)
	m.txs.Add(1)
	m.wcu.Add(2 * int64(len(in.TransactItems)))
	return m.db.TransactWriteItems(ctx, in, opts...)
}

// privateMoto starts a moto of the benchmark's own and returns a client
// factory on it and a fresh table.
func privateMoto(b *testing.B) (func() *dynamodb.Client, string) {
	m := emulator.StartMoto(b)
	client := func() *dynamodb.Client {
		return dynamodb.NewFromConfig(emulator.Config(b), func(o *dynamodb.Options) {
			o.BaseEndpoint = &m.Endpoint
			// As benchkit's clients for the emulator: no keep-alive (a
			// connection parked by a cancelled dial stalls a single-threaded
			// moto) and no warnings about bodies of cancelled calls.
			o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) { t.DisableKeepAlives = true })
			o.Logger = logging.Nop{}
		})
	}
	return client, emulator.NewTable(b, client())
}

// BenchmarkMultiCost: one worker, buckets that never run dry. A grant from
// 1 bucket is one UpdateItem; from 2 or 3 it is one TransactWriteItems of 2
// or 3 items. Reports requests, write units and latency per grant.
func BenchmarkMultiCost(b *testing.B) {
	client, table := privateMoto(b)
	for _, k := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("buckets=%d", k), func(b *testing.B) {
			m := &wcuMeter{db: client()}
			l, err := limiter.New(m, limiter.WithTable(table))
			if err != nil {
				b.Fatal(err)
			}
			buckets := make([]limiter.Bucket, k)
			for i := range buckets {
				buckets[i] = limiter.Bucket{Key: fmt.Sprintf("bench#cost-%d-%d", k, i), Limit: limiter.PerSecond(1e6, 1e6)}
			}
			ctx := context.Background()
			t0 := time.Now()
			for b.Loop() {
				if _, err := l.TakeMulti(ctx, buckets, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(m.requests.Load())/float64(b.N), "req/grant")
			b.ReportMetric(float64(m.wcu.Load())/float64(b.N), "WCU/grant")
			b.ReportMetric(float64(time.Since(t0).Microseconds())/float64(b.N), "µs/grant")
		})
	}
}

// BenchmarkMultiContended: 16 workers for -fleet.duration, as 8 properties
// of 2 workers each, every property's share (5/s, burst 5) nested in one
// credential (20/s, burst 40) and taken with WaitMulti; beside it, the
// same 16 workers on the credential bucket alone with Wait. Reports
// requests and write units per grant, and the credential's utilization.
func BenchmarkMultiContended(b *testing.B) {
	client, table := privateMoto(b)
	cred := limiter.Bucket{Key: "bench#cred", Limit: contendedLimit}
	for _, nested := range []bool{false, true} {
		b.Run(map[bool]string{false: "single-wait", true: "nested-waitmulti"}[nested], func(b *testing.B) {
			meters := make([]*wcuMeter, 16)
			takers := make([]benchkit.Taker, 16)
			credKey := fmt.Sprintf("%s-%v", cred.Key, nested)
			for i := range takers {
				meters[i] = &wcuMeter{db: client()}
				l, err := limiter.New(meters[i], limiter.WithTable(table))
				if err != nil {
					b.Fatal(err)
				}
				buckets := []limiter.Bucket{{Key: credKey, Limit: cred.Limit}}
				if nested {
					buckets = append(buckets, limiter.Bucket{Key: fmt.Sprintf("%s#p%d", credKey, i/2), Limit: limiter.PerSecond(5, 5)})
				}
				takers[i] = multiWait(l, buckets, 2*time.Second)
			}
			res := benchkit.RunFleet(context.Background(), takers, *fleetDuration)
			if res.Failures > 0 {
				b.Errorf("%d failed attempts, first: %v", res.Failures, res.FirstError)
			}
			var req, wcu, txs int64
			for _, m := range meters {
				req, wcu, txs = req+m.requests.Load(), wcu+m.wcu.Load(), txs+m.txs.Load()
			}
			g := float64(len(res.Grants))
			b.ReportMetric(g, "grants")
			b.ReportMetric(float64(req)/g, "req/grant")
			b.ReportMetric(float64(wcu)/g, "WCU/grant")
			b.ReportMetric(g/res.Allowed(cred.Limit), "utilization")
			b.ReportMetric(res.OverBound(cred.Limit), "over-bound")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func multiWait(l *limiter.Limiter, buckets []limiter.Bucket, maxWait time.Duration) benchkit.Taker {
	return func(ctx context.Context) benchkit.Attempt {
		r, err := l.WaitMulti(ctx, buckets, 1, maxWait)
		if err == nil {
			return benchkit.Attempt{Outcome: benchkit.Granted, At: r.Slot}
		}
		return attempt(ctx, err)
	}
}

// attempt is a failed call as the fleet loop sees it. WaitMulti refuses a
// slot past ctx's deadline a moment before ctx reports it: that is the end
// of the run, not a failure.
func attempt(ctx context.Context, err error) benchkit.Attempt {
	if wait, denied := limiter.RetryAfter(err); denied {
		return benchkit.Attempt{Outcome: benchkit.Denied, Wait: wait}
	}
	if errors.Is(err, limiter.ErrContended) {
		// Contention is not exhaustion: a caller asks again at once, as
		// otapush and dispatch do; its requests count in req/grant.
		return benchkit.Attempt{Outcome: benchkit.Denied, Wait: time.Duration(rand.Int64N(int64(10 * time.Millisecond)))}
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return benchkit.Attempt{Outcome: benchkit.Stopped, Err: err}
	}
	return benchkit.Attempt{Outcome: benchkit.Failed, Err: err}
}

// BenchmarkShardedThroughput: 32 workers take from one bucket spread over
// k shards, as fast as they can, for -fleet.duration. The limit (5000/s,
// burst 5000) is far above what the emulator serves, so the bench
// measures the store: aggregate grants/s, requests per grant, and writes
// per second on the hottest item. On DynamoDB an item takes about 1000
// writes/s, so a bucket above that needs k ≥ rate/1000 shards; a
// single-threaded moto serves one request at a time whatever the item, so
// here k cannot raise the aggregate, only lower the per-item rate.
func BenchmarkShardedThroughput(b *testing.B) {
	client, table := privateMoto(b)
	for _, k := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("shards=%d", k), func(b *testing.B) {
			s := limiter.ShardedBucket{Key: fmt.Sprintf("bench#hot-%d", k), Limit: limiter.PerSecond(5000, 5000), Shards: k}
			var mu sync.Mutex
			perShard := map[string]int{}
			takers := make([]benchkit.Taker, 32)
			meters := make([]*wcuMeter, len(takers))
			for i := range takers {
				meters[i] = &wcuMeter{db: client()}
				l, err := limiter.New(meters[i], limiter.WithTable(table))
				if err != nil {
					b.Fatal(err)
				}
				takers[i] = func(ctx context.Context) benchkit.Attempt {
					r, err := l.TakeSharded(ctx, s, 1)
					if err == nil {
						mu.Lock()
						perShard[r.Key]++
						mu.Unlock()
						return benchkit.Attempt{Outcome: benchkit.Granted, At: r.Slot}
					}
					return attempt(ctx, err)
				}
			}
			res := benchkit.RunFleet(context.Background(), takers, *fleetDuration)
			if res.Failures > 0 {
				b.Errorf("%d failed attempts, first: %v", res.Failures, res.FirstError)
			}
			var req int64
			for _, m := range meters {
				req += m.requests.Load()
			}
			hottest := 0
			for _, n := range perShard {
				hottest = max(hottest, n)
			}
			secs := res.Elapsed.Seconds()
			b.ReportMetric(float64(len(res.Grants))/secs, "grants/s")
			b.ReportMetric(float64(req)/float64(len(res.Grants)), "req/grant")
			b.ReportMetric(float64(hottest)/secs, "hottest-item-writes/s")
			b.ReportMetric(res.OverBound(s.Limit), "over-bound")
			b.ReportMetric(0, "ns/op")
		})
	}
}
