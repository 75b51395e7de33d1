package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// MaxShards bounds how many items one sharded bucket spreads over.
const MaxShards = 1000

// ShardSeparator separates a sharded bucket's key from its shard number
// (ShardKey). A plain bucket key may not contain it (Bucket.Validate), so a
// shard's item can never be the item of a plain bucket: "a#s1" stays a
// plain key of its own, and ShardKey("a", 1) is "a␟1".
const ShardSeparator = "\u241f" // ␟, SYMBOL FOR UNIT SEPARATOR

// ShardedBucket is a hot bucket spread over Shards items, so that its
// writes are not all on one DynamoDB item (an item takes about 1000 writes
// per second). Shard i has key Key␟<i> (ShardKey), rate Limit.Rate/Shards
// and its share of the burst: every shard gets floor(burst/Shards) and the
// first burst mod Shards shards one more, so the shards' bursts add up to
// the burst exactly and each is at least 1. Together the shards grant at
// most burst + rate·W over any window W, like the bucket they replace (each
// shard's interval is rounded up, so the rates add up to at most rate).
//
// Zero or one shard is the plain bucket under Key, with no suffix.
// Changing Shards moves the bucket to a new set of items, which start full:
// the fleet may see up to one extra burst at the change.
//
// A request must fit in one shard: n is at most floor(burst/Shards).
type ShardedBucket struct {
	Key    string
	Limit  Limit
	Shards int
}

// ShardKey is the key of shard i of the bucket with the given key:
// key + ShardSeparator + i. (Before 2026-12 it was key + "#s" + i, which a
// plain key could equal; sharded buckets moved to new items, which start
// full.)
func ShardKey(key string, i int) string { return key + ShardSeparator + strconv.Itoa(i) }

// checkShardSeparator refuses a key that uses ShardSeparator other than as
// one shard suffix: base ␟ decimal, with a base free of it.
func checkShardSeparator(key string) error {
	base, shard, found := strings.Cut(key, ShardSeparator)
	if !found {
		return nil
	}
	if i, err := strconv.Atoi(shard); base == "" || err != nil || i < 0 || strconv.Itoa(i) != shard {
		return &ArgumentError{Field: "bucket.key", Reason: fmt.Sprintf("%q contains %q, which only shard keys (limiter.ShardKey) may", key, ShardSeparator)}
	}
	return nil
}

// SplitLimit splits l over k shards as ShardedBucket describes. It refuses,
// as an *ArgumentError on "shards", k < 1 or above MaxShards, a burst
// smaller than k (a shard would hold no token), a shard rate that is not a
// valid limit (it rounds to zero or below gcra's minimum), and a split whose
// rounded shard intervals would lose more than 1% of the rate.
func SplitLimit(l Limit, k int) ([]Limit, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	switch {
	case k < 1:
		return nil, &ArgumentError{Field: "shards", Reason: fmt.Sprintf("%d, want ≥ 1", k)}
	case k > MaxShards:
		return nil, &ArgumentError{Field: "shards", Reason: fmt.Sprintf("%d, want at most %d", k, MaxShards)}
	case l.Burst < k:
		return nil, &ArgumentError{Field: "shards", Reason: fmt.Sprintf("%d shards of burst %d leave a shard with no token (burst/shards < 1): want shards ≤ burst", k, l.Burst)}
	}
	out := make([]Limit, k)
	for i := range out {
		out[i] = Limit{Rate: l.Rate / float64(k), Burst: l.Burst / k, Margin: l.Margin}
		if i < l.Burst%k {
			out[i].Burst++
		}
		if err := out[i].Validate(); err != nil {
			return nil, &ArgumentError{Field: "shards", Reason: fmt.Sprintf("%d shards of rate %v: the shard limit is refused: %v", k, l.Rate, err)}
		}
	}
	if got := float64(k) * 1e6 / float64(out[0].Interval()); got < 0.99*l.Rate {
		return nil, &ArgumentError{Field: "shards", Reason: fmt.Sprintf("%d shards of rate %v: each shard's interval rounds to %dµs, %.4g tokens/s in all, more than 1%% below the rate", k, l.Rate, out[0].Interval(), got)}
	}
	return out, nil
}

// Validate reports what is wrong with s as an *ArgumentError naming the
// field ("bucket.key", "limit.rate", "limit.burst", "shards").
func (s ShardedBucket) Validate() error {
	_, err := s.Buckets()
	return err
}

// Buckets lists the shards as plain buckets, shard i at index i. They may
// be used on their own, e.g. one shard inside a TakeMulti.
func (s ShardedBucket) Buckets() ([]Bucket, error) {
	if err := (Bucket{Key: s.Key, Limit: s.Limit}).Validate(); err != nil {
		return nil, err
	}
	if s.Shards == 0 || s.Shards == 1 {
		return []Bucket{{Key: s.Key, Limit: s.Limit}}, nil
	}
	limits, err := SplitLimit(s.Limit, s.Shards)
	if err != nil {
		return nil, err
	}
	out := make([]Bucket, len(limits))
	for i, l := range limits {
		out[i] = Bucket{Key: ShardKey(s.Key, i), Limit: l}
		if err := out[i].Validate(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TakeSharded takes n tokens now from one shard of s: a shard picked at
// random, then the others in turn while the ones tried are empty. The
// Reservation's Key is the shard's. A denial (every shard empty) is an
// *ExhaustedError on s.Key whose RetryAfter is the shortest of the shards'
// waits: when the first shard would grant. Shards this process already
// knows to be empty are skipped with no call (the denial cache).
func (l *Limiter) TakeSharded(ctx context.Context, s ShardedBucket, n int) (Reservation, error) {
	return l.reserveSharded(ctx, s, n, 0)
}

// ReserveSharded books n tokens from one shard of s at the earliest slot
// this process knows of within maxDelay: the shards are tried in order of
// the slot predicted from the tat last seen for each (shards never seen
// first, since they are likely full; random among equals), and the first
// that grants is booked. A denial is an *ExhaustedError on s.Key with the
// shortest of the shards' waits.
func (l *Limiter) ReserveSharded(ctx context.Context, s ShardedBucket, n int, maxDelay time.Duration) (Reservation, error) {
	return l.reserveSharded(ctx, s, n, maxDelay)
}

func (l *Limiter) reserveSharded(ctx context.Context, s ShardedBucket, n int, maxDelay time.Duration) (Reservation, error) {
	shards, err := s.Buckets()
	if err != nil {
		return Reservation{}, err
	}
	// The last shard has the smallest burst: a request it could never
	// grant is refused whatever shard would be picked.
	if err := gcra.Check(shards[len(shards)-1].Limit, n, maxDelay.Microseconds()); err != nil {
		return Reservation{}, fmt.Errorf("bucket %q over %d shards: %w", s.Key, len(shards), err)
	}
	var best *ExhaustedError
	for _, i := range l.shardOrder(shards, n, maxDelay.Microseconds()) {
		r, err := l.reserve(ctx, shards[i], n, maxDelay)
		if err == nil {
			return r, nil
		}
		var ex *ExhaustedError
		if !errors.As(err, &ex) {
			return Reservation{}, err
		}
		if best == nil || ex.RetryAfter < best.RetryAfter {
			best = ex
		}
	}
	return Reservation{}, &ExhaustedError{Key: s.Key, N: n, RetryAfter: best.RetryAfter}
}

// shardOrder lists the shards' indexes by the slot this process predicts
// for n tokens in each (a denied shard after every granting one, by its
// wait), starting the ties at a random shard so that workers spread.
func (l *Limiter) shardOrder(shards []Bucket, n int, delay int64) []int {
	now := micros(l.now())
	start := rand.IntN(len(shards))
	order := make([]int, len(shards))
	predicted := make([]int64, len(shards))
	for j := range order {
		i := (start + j) % len(shards)
		order[j] = i
		tat, _ := l.seen.get(shards[i].Key, now, 0)
		if d := gcra.Decide(tat, now, shards[i].Limit, n, delay); d.Allowed {
			predicted[i] = d.Slot
		} else {
			predicted[i] = now + delay + d.RetryAfter
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return predicted[order[a]] < predicted[order[b]] })
	return order
}
