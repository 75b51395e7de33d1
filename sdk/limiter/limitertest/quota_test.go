package limitertest

import (
	"context"
	"hash/fnv"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// three is a quota of 3 a UTC day on ten's key: t0 (noon) is 12 h before
// its reset.
var three = limiter.QuotaBucket{Key: ten.Key, Quota: gcra.Quota{Count: 3, Period: gcra.Day}}

func takeQuota(q limiter.QuotaBucket, n int, id string) func(context.Context, *Limiter) (time.Time, error) {
	return func(ctx context.Context, l *Limiter) (time.Time, error) {
		_, err := l.TakeQuota(ctx, q, n, id)
		return time.Time{}, err
	}
}

func takeWithQuota(b limiter.Bucket, q limiter.QuotaBucket, n int, id string) func(context.Context, *Limiter) (time.Time, error) {
	return func(ctx context.Context, l *Limiter) (time.Time, error) {
		r, err := l.TakeWithQuota(ctx, []limiter.Bucket{b}, q, n, id)
		return r.Slot, err
	}
}

// spreadOf is id's offset into the minute after a quota's reset as the
// limiter documents it: FNV-1a of id, modulo a minute in microseconds.
func spreadOf(id string) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(id))
	return time.Duration(h.Sum64()%uint64(time.Minute/time.Microsecond)) * time.Microsecond
}

// Calendar quotas as the limiter documents them (TakeQuota,
// TakeWithQuota), step by step on one bucket and its quota.
func TestDocumentedQuotaBehaviour(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"a quota grants its count in a period, then waits for its reset and the id's spread", []step{
			{at: 0, call: takeQuota(three, 2, "a")},
			{at: time.Hour, call: takeQuota(three, 1, "b")},
			{at: time.Hour, call: takeQuota(three, 1, "job-1"), wait: 11*time.Hour + spreadOf("job-1")},
			{at: 12 * time.Hour, call: takeQuota(three, 3, "c")},
			{at: 12 * time.Hour, call: takeQuota(three, 4, "c"), err: limiter.ErrNeverGrantable},
		}},
		{"tokens and quota are taken together or not at all", []step{
			{at: 0, call: take(ten, 3), slot: 0},
			// The bucket refuses (2 left): the quota is not spent.
			{at: 0, call: takeWithQuota(ten, three, 3, "b"), wait: 100 * time.Millisecond},
			{at: time.Second, call: takeQuota(three, 3, "c")},
			// The quota refuses: no token is spent.
			{at: time.Second, call: takeWithQuota(ten, three, 1, "d"), wait: 12*time.Hour - time.Second + spreadOf("d")},
			{at: time.Second, call: take(ten, 5), slot: time.Second},
			// Both refuse: the longer wait.
			{at: time.Second, call: takeWithQuota(ten, three, 1, "e"), wait: 12*time.Hour - time.Second + spreadOf("e")},
			{at: 12 * time.Hour, call: takeWithQuota(ten, three, 3, "f"), slot: 12 * time.Hour},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { play(t, tt.steps) })
	}
}
