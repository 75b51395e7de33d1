package limiter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// fakeTx answers TransactWriteItems with tx and fails the test on any other
// call; it records what it was sent.
type fakeTx struct {
	unreachable
	tx   func(ctx context.Context, in *dynamodb.TransactWriteItemsInput) error
	sent []*dynamodb.TransactWriteItemsInput
	opts []dynamodb.Options
}

func (f *fakeTx) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.sent = append(f.sent, in)
	var o dynamodb.Options
	o.RetryMaxAttempts = 3
	for _, fn := range optFns {
		fn(&o)
	}
	f.opts = append(f.opts, o)
	if err := f.tx(ctx, in); err != nil {
		return nil, err
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func TestMultiBadInputIsRefusedNamingTheField(t *testing.T) {
	ok := PerSecond(10, 5)
	many := make([]Bucket, MaxMultiBuckets+1)
	for i := range many {
		many[i] = Bucket{Key: fmt.Sprintf("k%d", i), Limit: ok}
	}
	tests := []struct {
		name     string
		buckets  []Bucket
		n        int
		maxDelay time.Duration
		field    string
		mention  string
		never    bool
	}{
		{"no buckets", nil, 1, 0, "buckets", "none", false},
		{"more than a transaction holds", many, 1, 0, "buckets", "at most 100", false},
		{"same bucket twice", []Bucket{{Key: "a", Limit: ok}, {Key: "b", Limit: ok}, {Key: "a", Limit: ok}}, 1, 0, "bucket.key", "buckets[2]", false},
		{"empty key", []Bucket{{Key: "a", Limit: ok}, {Key: "", Limit: ok}}, 1, 0, "bucket.key", "buckets[1]", false},
		{"bad rate", []Bucket{{Key: "a", Limit: Limit{Rate: 0, Burst: 1}}, {Key: "b", Limit: ok}}, 1, 0, "limit.rate", "buckets[0]", false},
		{"zero n", []Bucket{{Key: "a", Limit: ok}, {Key: "b", Limit: ok}}, 0, 0, "n", "buckets[0]", false},
		{"negative maxDelay", []Bucket{{Key: "a", Limit: ok}, {Key: "b", Limit: ok}}, 1, -time.Second, "maxDelay", "buckets[0]", false},
		{"n over one bucket's burst", []Bucket{{Key: "a", Limit: ok}, {Key: "b", Limit: PerSecond(1, 2)}}, 3, 0, "n", `buckets[1] ("b")`, true},
	}
	l, err := New(&fakeTx{unreachable: unreachable{t}, tx: func(context.Context, *dynamodb.TransactWriteItemsInput) error {
		t.Fatal("TransactWriteItems called for a request that should have been refused")
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.ReserveMulti(context.Background(), tt.buckets, tt.n, tt.maxDelay)
			var ae *ArgumentError
			if !errors.As(err, &ae) || ae.Field != tt.field || !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("ReserveMulti = %v, want an ArgumentError on %s", err, tt.field)
			}
			if errors.Is(err, ErrNeverGrantable) != tt.never {
				t.Fatalf("ReserveMulti = %v: ErrNeverGrantable is %v, want %v", err, !tt.never, tt.never)
			}
			if !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("message %q does not name %s and %s", err, tt.field, tt.mention)
			}
		})
	}
}

func TestMultiNeedsATransactionalClient(t *testing.T) {
	l, err := New(unreachable{t})
	if err != nil {
		t.Fatal(err)
	}
	two := []Bucket{{Key: "a", Limit: PerSecond(1, 1)}, {Key: "b", Limit: PerSecond(1, 1)}}
	if _, err := l.TakeMulti(context.Background(), two, 1); !errors.Is(err, ErrNoTransactions) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("TakeMulti = %v, want ErrNoTransactions naming the client type", err)
	}
}

func canceled(codes ...string) error {
	e := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled")}
	for _, c := range codes {
		e.CancellationReasons = append(e.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
	}
	return e
}

// Store failures are typed as on the single path, the transaction is never
// resent by the SDK, and a lost race or conflict is retried with a fresh now
// up to the attempts allowed.
func TestMultiStoreOutcomes(t *testing.T) {
	two := []Bucket{{Key: "a", Limit: PerSecond(10, 10)}, {Key: "b", Limit: PerSecond(1, 1)}}
	tests := []struct {
		name  string
		fail  func(ctx context.Context, call int) error
		want  error
		calls int
	}{
		{"granted", func(context.Context, int) error { return nil }, nil, 1},
		{"conflict then granted", func(_ context.Context, call int) error {
			if call == 0 {
				return canceled("None", "TransactionConflict")
			}
			return nil
		}, nil, 2},
		{"conflicts until attempts run out", func(context.Context, int) error { return canceled("TransactionConflict", "None") }, ErrContended, 4},
		{"throttled", func(context.Context, int) error { return canceled("ThrottlingError", "None") }, ErrUnavailable, 4},
		{"malformed reasons", func(context.Context, int) error { return canceled("None") }, ErrUnavailable, 4},
		{"network error", func(context.Context, int) error { return errors.New("connection reset") }, ErrUnavailable, 4},
		{"table not found", func(context.Context, int) error {
			return &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
		}, ErrTableNotFound, 1},
		{"context ended after sending", func(ctx context.Context, _ int) error {
			<-ctx.Done()
			return ctx.Err()
		}, ErrOutcomeUnknown, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			f := &fakeTx{unreachable: unreachable{t}}
			f.tx = func(ctx context.Context, _ *dynamodb.TransactWriteItemsInput) error {
				defer func() { calls++ }()
				if tt.want == ErrOutcomeUnknown {
					cancel()
				}
				return tt.fail(ctx, calls)
			}
			l, err := New(f)
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.TakeMulti(ctx, two, 1)
			if tt.want == nil && (err != nil || len(r.Keys) != 2) {
				t.Fatalf("TakeMulti = %+v, %v; want granted", r, err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("TakeMulti = %v, want %v", err, tt.want)
			}
			if tt.want == ErrContended && (errors.Is(err, ErrUnavailable) || errors.Is(err, ErrExhausted)) {
				t.Fatalf("TakeMulti = %v: contention reported as an outage or a denial", err)
			}
			if calls != tt.calls {
				t.Fatalf("%d transactions, want %d", calls, tt.calls)
			}
			for _, o := range f.opts {
				if o.RetryMaxAttempts != 1 {
					t.Fatalf("the SDK may resend the transaction (RetryMaxAttempts %d)", o.RetryMaxAttempts)
				}
			}
		})
	}
}

// The items sent are the single path's guarded forms, picked per bucket from
// the tat seen against the common slot each is charged at, bounded by it; a
// cancellation teaches the state of each failed item, and a denial it
// proves is final.
func TestMultiFormsAndLearning(t *testing.T) {
	now := time.UnixMicro(1_000_000_000)
	fast := Bucket{Key: "fast", Limit: PerSecond(10, 10)} // T 100ms τ 1s
	slow := Bucket{Key: "slow", Limit: PerSecond(1, 1)}   // T 1s τ 1s
	f := &fakeTx{unreachable: unreachable{t}}
	l, err := New(f, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	l.seen.observe("fast", now.UnixMicro()+500_000, now.UnixMicro()) // seen busy
	call := 0
	f.tx = func(context.Context, *dynamodb.TransactWriteItemsInput) error {
		call++
		if call == 1 {
			// slow is busy after all: its condition fails, with the item.
			e := canceled("None", "ConditionalCheckFailed")
			e.(*types.TransactionCanceledException).CancellationReasons[1].Item = map[string]types.AttributeValue{
				KeyAttribute: &types.AttributeValueMemberS{Value: "slow"}, TATAttribute: num(now.UnixMicro() + 2_000_000)}
			return e
		}
		return nil
	}
	r, err := l.ReserveMulti(context.Background(), []Bucket{fast, slow}, 1, 3*time.Second)
	if err != nil || !r.Slot.Equal(now.Add(2*time.Second)) || r.Binding != "slow" {
		t.Fatalf("ReserveMulti = %+v, %v; want slot now+2s bound by slow", r, err)
	}
	if len(f.sent) != 2 {
		t.Fatalf("%d transactions, want 2", len(f.sent))
	}
	first, second := f.sent[0].TransactItems, f.sent[1].TransactItems
	cond := func(it types.TransactWriteItem) string { return aws.ToString(it.Update.ConditionExpression) }
	val := func(it types.TransactWriteItem, name string) string {
		return it.Update.ExpressionAttributeValues[name].(*types.AttributeValueMemberN).Value
	}
	if !strings.Contains(cond(first[0]), "#tat > :now") || !strings.Contains(cond(first[1]), "attribute_not_exists") {
		t.Fatalf("first attempt forms: %q, %q; want busy for fast, idle for slow", cond(first[0]), cond(first[1]))
	}
	// First attempt at slot now: fast may hold tat up to now + τ − T.
	if got, want := val(first[0], ":limit"), fmt.Sprint(now.UnixMicro()+900_000); got != want {
		t.Fatalf("fast's first bound %s, want %s", got, want)
	}
	// Common slot now+2s: both buckets are charged there, as a request
	// arriving then, so both tats seen (now+0.5s, now+2s) are idle at it,
	// and each write sets tat to the slot plus its interval.
	for k, next := range []int64{2_100_000, 3_000_000} {
		if !strings.Contains(cond(second[k]), "attribute_not_exists") {
			t.Fatalf("second attempt form for item %d: %q, want idle at the common slot", k, cond(second[k]))
		}
		if got, want := val(second[k], ":now"), fmt.Sprint(now.UnixMicro()+2_000_000); got != want {
			t.Fatalf("item %d charged at %s, want the common slot %s", k, got, want)
		}
		if got, want := val(second[k], ":next"), fmt.Sprint(now.UnixMicro()+next); got != want {
			t.Fatalf("item %d leaves tat %s, want %s", k, got, want)
		}
	}
	for _, it := range second {
		if it.Update.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
			t.Fatal("an item does not ask for ALL_OLD on a failed condition")
		}
	}
	// Both seen tats moved on to one interval past the common slot: the
	// next request that cannot fit is denied locally, with slow's exact
	// wait.
	_, err = l.ReserveMulti(context.Background(), []Bucket{fast, slow}, 1, time.Second)
	if wait, ok := RetryAfter(err); !ok || wait != 2*time.Second || len(f.sent) != 2 {
		t.Fatalf("ReserveMulti = %v after %d transactions; want a local denial, retry after 2s", err, len(f.sent))
	}
}

func TestSplitLimit(t *testing.T) {
	tests := []struct {
		name   string
		limit  Limit
		k      int
		bursts []int
		want   string // substring of the error; "" for valid
	}{
		{"even", PerSecond(40, 20), 4, []int{5, 5, 5, 5}, ""},
		{"remainder to the first shards", PerSecond(3, 7), 3, []int{3, 2, 2}, ""},
		{"one shard", PerSecond(3, 7), 1, []int{7}, ""},
		{"burst equal to shards", PerSecond(8, 8), 8, []int{1, 1, 1, 1, 1, 1, 1, 1}, ""},
		{"zero shards", PerSecond(10, 10), 0, nil, "invalid shards: 0"},
		{"negative shards", PerSecond(10, 10), -2, nil, "invalid shards: -2"},
		{"burst below shards", PerSecond(10, 3), 4, nil, "burst/shards < 1"},
		{"shard rate rounds away", PerSecond(9e5, 1000), 2, nil, "rounds to"},
		{"shard limit refused", Limit{Rate: 1.76e-9, Burst: 5}, 4, nil, "shard limit is refused"},
		{"too many shards", PerSecond(1e4, 5000), MaxShards + 1, nil, "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limits, err := SplitLimit(tt.limit, tt.k)
			if tt.want != "" {
				var ae *ArgumentError
				if !errors.As(err, &ae) || ae.Field != "shards" || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("SplitLimit = %v, want an ArgumentError on shards mentioning %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sum := 0.0
			for i, l := range limits {
				if l.Burst != tt.bursts[i] {
					t.Fatalf("shard %d burst %d, want %d", i, l.Burst, tt.bursts[i])
				}
				sum += 1e6 / float64(l.Interval())
			}
			if sum > tt.limit.Rate+1e-9 || sum < 0.99*tt.limit.Rate {
				t.Fatalf("shard rates add up to %v, want ≤ %v and within 1%%", sum, tt.limit.Rate)
			}
		})
	}
}

func TestShardedRefusesBeforeSending(t *testing.T) {
	l, err := New(unreachable{t})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		s     ShardedBucket
		n     int
		field string
		never bool
	}{
		{"n over a shard's burst", ShardedBucket{Key: "k", Limit: PerSecond(10, 7), Shards: 3}, 3, "n", true},
		{"negative shards", ShardedBucket{Key: "k", Limit: PerSecond(10, 7), Shards: -1}, 1, "shards", false},
		{"burst below shards", ShardedBucket{Key: "k", Limit: PerSecond(10, 2), Shards: 3}, 1, "shards", false},
		{"empty key", ShardedBucket{Key: "", Limit: PerSecond(10, 7), Shards: 3}, 1, "bucket.key", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.TakeSharded(context.Background(), tt.s, tt.n)
			var ae *ArgumentError
			if !errors.As(err, &ae) || ae.Field != tt.field || errors.Is(err, ErrNeverGrantable) != tt.never {
				t.Fatalf("TakeSharded = %v, want an ArgumentError on %s (never grantable: %v)", err, tt.field, tt.never)
			}
		})
	}
	s := ShardedBucket{Key: "k", Limit: PerSecond(10, 7), Shards: 3}
	bs, err := s.Buckets()
	if err != nil || len(bs) != 3 || bs[2].Key != "k"+ShardSeparator+"2" || ShardKey("k", 2) != "k"+ShardSeparator+"2" {
		t.Fatalf("Buckets = %+v, %v", bs, err)
	}
	if bs, _ := (ShardedBucket{Key: "k", Limit: PerSecond(10, 7)}).Buckets(); len(bs) != 1 || bs[0].Key != "k" {
		t.Fatalf("an unsharded bucket is %+v, want the plain key", bs)
	}
}
