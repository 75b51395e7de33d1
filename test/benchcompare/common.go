// Package benchcompare measures fleetbucket against the approaches it
// replaces, on the local stack, each number a ratio within one run:
//
//   - the common DynamoDB token bucket, read-then-conditional-write, as
//     github.com/mennanov/limiters implements it (compare_bench_test.go);
//   - per-worker local limiters, golang.org/x/time/rate, against a vendor's
//     quota (cmd/seedfigure, which draws docs/bench/fleet-vs-local.svg).
//
// It is a module of its own so that those libraries never enter the SDK's
// go.mod. scripts/bench.sh runs it; by hand, with the local stack up:
//
//	cd test/benchcompare && go test -run '^$' -bench . -benchtime 1x
package benchcompare

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
	"github.com/mennanov/limiters"
)

// CommonTaker is one worker of the common approach: mennanov/limiters'
// TokenBucket on its DynamoDB backend (GetItem with a consistent read, then
// PutItem; with raceCheck the PutItem is guarded by the item's version, and
// a lost race comes back as ErrRaceCondition, which the fleet loop answers
// by asking again at once).
//
// The library expects a distributed lock around the read and the write
// (etcd, Consul, ZooKeeper, Redis, PostgreSQL or memcached), none of which
// a DynamoDB-only deployment has; this uses its no-op lock (LockNoop), the
// in-process option, as a fleet of Lambdas sharing only DynamoDB would.
func CommonTaker(db *dynamodb.Client, table, key string, l limiter.Limit, raceCheck bool) benchkit.Taker {
	clock := &recordingClock{}
	props := limiters.DynamoDBTableProperties{TableName: table, PartitionKeyName: limiter.KeyAttribute, TTLFieldName: limiter.TTLAttribute}
	backend := limiters.NewTokenBucketDynamoDB(db, key, props, time.Hour, raceCheck)
	refill := time.Duration(float64(time.Second) / l.Rate)
	tb := limiters.NewTokenBucket(int64(l.Burst), refill, limiters.NewLockNoop(), backend, clock, discard{})
	return func(ctx context.Context) benchkit.Attempt {
		wait, err := tb.Take(ctx, 1)
		switch {
		case err == nil:
			return benchkit.Attempt{Outcome: benchkit.Granted, At: clock.last}
		case errors.Is(err, limiters.ErrLimitExhausted):
			return benchkit.Attempt{Outcome: benchkit.Denied, Wait: wait}
		case errors.Is(err, limiters.ErrRaceCondition):
			return benchkit.Attempt{Outcome: benchkit.Conflict}
		case ctx.Err() != nil:
			return benchkit.Attempt{Outcome: benchkit.Stopped, Err: err}
		}
		return benchkit.Attempt{Outcome: benchkit.Failed, Err: err}
	}
}

// recordingClock remembers its last reading: the now a TokenBucket decided
// a grant at. One worker's Take reads it once, under the bucket's mutex,
// and the worker reads it back in the same goroutine.
type recordingClock struct{ last time.Time }

func (c *recordingClock) Now() time.Time {
	c.last = time.Now()
	return c.last
}

type discard struct{}

func (discard) Log(...any) {}
