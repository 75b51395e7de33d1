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
	"github.com/fleetbucket/fleetbucket/sdk/breaker"
)

// scripted answers each UpdateItem with the next step of a script and
// records what it was sent. It decides nothing itself: each step says what
// the store answers, so the tests pin the limiter's reaction, not a model of
// DynamoDB (the integration tests run against the emulator for that).
type scripted struct {
	unreachable
	steps []func(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	sent  []*dynamodb.UpdateItemInput
}

func (s *scripted) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	s.sent = append(s.sent, in)
	if len(s.sent) > len(s.steps) {
		s.t.Fatalf("write %d sent, the script has %d", len(s.sent), len(s.steps))
	}
	return s.steps[len(s.sent)-1](ctx, in)
}

func value(in *dynamodb.UpdateItemInput, name string) string {
	switch v := in.ExpressionAttributeValues[name].(type) {
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberS:
		return v.Value
	}
	return ""
}

func item(tat int64, cid string) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: "k"}}
	if tat != 0 {
		it[TATAttribute] = num(tat)
	}
	if cid != "" {
		it["c0"], it["t0"] = str(cid), num(tat)
	}
	return it
}

func ccf(it map[string]types.AttributeValue) error {
	return &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed"), Item: it}
}

func granted(tat int64) func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return &dynamodb.UpdateItemOutput{Attributes: item(tat, "")}, nil
	}
}

func failWith(it map[string]types.AttributeValue) func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return nil, ccf(it)
	}
}

func isBusy(in *dynamodb.UpdateItemInput) bool {
	return strings.HasPrefix(aws.ToString(in.ConditionExpression), "#tat > :now")
}

// A clock that moves on every reading: a call that reads it per attempt
// would send a different :now each time.
func tickingClock(start time.Time, step time.Duration) func() time.Time {
	t := start
	return func() time.Time { t = t.Add(step); return t }
}

// Within one call the same now is kept across failed conditions: after an
// idle write fails, the busy write carries the same :now, so its first
// clause holds, and the call decides in two writes.
func TestConvergenceKeepsNowAcrossConditionFailures(t *testing.T) {
	start := time.UnixMicro(1_000_000_000)
	b := Bucket{Key: "k", Limit: PerSecond(10, 10)} // T 100ms, τ 1s
	tests := []struct {
		name       string
		steps      func(now *int64) []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
		wantWrites int
		want       error // nil: granted
	}{
		{"idle fails, busy grants", func(now *int64) []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){
				func(_ context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
					return nil, ccf(item(*now+300_000, "other.0")) // busy, 7 tokens left
				},
				granted(0), // replaced below
			}
		}, 2, nil},
		{"idle fails, busy denied by the item it returns", func(now *int64) []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){
				func(_ context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
					return nil, ccf(item(*now+900_000, "other.0")) // one token left
				},
				func(_ context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
					return nil, ccf(item(*now+1_000_000, "other.0")) // and someone took it
				},
			}
		}, 2, ErrExhausted},
		{"item deleted between every write", func(now *int64) []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){
				failWith(item(0, "")), // idle "fails": someone wrote, then reset, …
				failWith(item(0, "")),
				failWith(item(0, "")),
			}
		}, 3, ErrContended},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{unreachable: unreachable{t}}
			l, err := New(s, WithClock(tickingClock(start, time.Millisecond)))
			if err != nil {
				t.Fatal(err)
			}
			var now int64
			s.steps = tt.steps(&now)
			// The first write tells the call's now; the busy grant echoes
			// a tat consistent with it.
			first := s.steps[0]
			s.steps[0] = func(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				now = mustInt(t, value(in, ":now"))
				return first(ctx, in)
			}
			if tt.want == nil {
				s.steps[1] = func(_ context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
					return &dynamodb.UpdateItemOutput{Attributes: item(now+400_000, value(in, ":cid"))}, nil
				}
			}
			r, err := l.Take(context.Background(), b, 1)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("Take = %v, want granted", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("Take = %v, want %v", err, tt.want)
			case tt.want == ErrContended && (errors.Is(err, ErrExhausted) || errors.Is(err, ErrUnavailable)):
				t.Fatalf("Take = %v: contention reported as a denial or an outage", err)
			}
			if len(s.sent) != tt.wantWrites {
				t.Fatalf("%d writes, want %d", len(s.sent), tt.wantWrites)
			}
			for i, in := range s.sent {
				if got := value(in, ":now"); got != value(s.sent[0], ":now") {
					t.Fatalf("write %d sent :now %s, write 0 sent %s: the call changed its now", i, got, value(s.sent[0], ":now"))
				}
			}
			if len(s.sent) >= 2 && tt.want != ErrContended && !isBusy(s.sent[1]) {
				t.Fatalf("second write %q, want the busy form", aws.ToString(s.sent[1].ConditionExpression))
			}
			if tt.want == nil && r.Slot.UnixMicro() != now {
				t.Fatalf("Take's slot %d, want the call's own now %d", r.Slot.UnixMicro(), now)
			}
		})
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var v int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a number", s)
		}
		v = v*10 + int64(c-'0')
	}
	return v
}

var errLost = errors.New("injected: connection reset after sending")

// A write whose answer was lost is recognised by the next write of the same
// call (its tag comes back in ALL_OLD) and granted once, with the lost
// write's own now and size.
func TestLostAnswerIsRecognised(t *testing.T) {
	start := time.UnixMicro(1_000_000_000)
	b := Bucket{Key: "k", Limit: PerSecond(10, 10)}
	s := &scripted{unreachable: unreachable{t}}
	l, err := New(s, WithClock(tickingClock(start, time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	var landed *dynamodb.UpdateItemInput
	s.steps = append(s.steps,
		func(_ context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			landed = in // applied by the store; the answer never arrives
			return nil, errLost
		},
		func(_ context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			if !strings.Contains(aws.ToString(in.ConditionExpression), "NOT begins_with(#cid, :call)") ||
				!strings.HasPrefix(value(landed, ":cid"), value(in, ":call")) {
				t.Fatalf("retry %q with :call %q does not guard against the call's own tag %q",
					aws.ToString(in.ConditionExpression), value(in, ":call"), value(landed, ":cid"))
			}
			// Another worker, in another lane, wrote since: the item's tat
			// moved on, the lane still tells what the lost write left.
			left := mustInt(t, value(landed, ":next"))
			it := item(left+100_000, "")
			it[landed.ExpressionAttributeNames["#cid"]] = str(value(landed, ":cid"))
			it[landed.ExpressionAttributeNames["#lt"]] = num(left)
			return nil, ccf(it)
		},
	)
	r, err := l.Take(context.Background(), b, 1)
	if err != nil {
		t.Fatalf("Take = %v, want the landed write granted", err)
	}
	if want := mustInt(t, value(landed, ":now")); r.Slot.UnixMicro() != want || r.Tokens != 1 {
		t.Fatalf("granted %+v, want 1 token at the lost write's now %d", r, want)
	}
	if value(s.sent[1], ":now") == value(landed, ":now") {
		t.Fatal("the retry after a backoff kept the old now; it must read the clock again")
	}
}

// A conflicting transaction is contention: retried with backoff, never fed
// to the breaker, and reported as ErrContended when the attempts run out.
func TestTransactionConflictIsContention(t *testing.T) {
	b := Bucket{Key: "k", Limit: PerSecond(10, 10)}
	conflict := func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}
	}
	s := &scripted{unreachable: unreachable{t}, steps: []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){
		conflict, conflict, conflict, granted(2_000_000_000)}}
	l, err := New(s, WithCircuitBreaker(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Take(context.Background(), b, 1)
	var ce *ContendedError
	if !errors.As(err, &ce) || errors.Is(err, ErrExhausted) || errors.Is(err, ErrUnavailable) || ce.Writes != 3 {
		t.Fatalf("Take = %v, want ErrContended after 3 writes, neither a denial nor an outage", err)
	}
	var tce *types.TransactionConflictException
	if !errors.As(err, &tce) {
		t.Fatalf("Take = %v does not unwrap to the conflict", err)
	}
	// The breaker (threshold 1) is still closed: the next call is sent.
	if _, err := l.Take(context.Background(), b, 1); err != nil {
		t.Fatalf("Take after conflicts = %v: the breaker counted contention as failure", err)
	}
}

// A store that hangs: each attempt gives up after the per-attempt timeout,
// counts as a failure, and the breaker opens.
func TestHangingStoreTimesOutAndOpensTheBreaker(t *testing.T) {
	b := Bucket{Key: "k", Limit: PerSecond(10, 10)}
	hang := func(ctx context.Context, _ *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s := &scripted{unreachable: unreachable{t}, steps: []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){hang, hang, hang}}
	l, err := New(s, WithAttemptTimeout(20*time.Millisecond), WithMaxAttempts(1), WithCircuitBreaker(3, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 3 {
		started := time.Now()
		_, err := l.Take(ctx, b, 1)
		var te *AttemptTimeoutError
		if !errors.Is(err, ErrUnavailable) || !errors.As(err, &te) || errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("call %d on a hanging store = %v, want ErrUnavailable wrapping an AttemptTimeoutError", i, err)
		}
		if d := time.Since(started); d > 10*time.Second {
			t.Fatalf("call %d took %v: the per-attempt timeout did not bound it", i, d)
		}
	}
	if _, err := l.Take(ctx, b, 1); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("Take after 3 timeouts = %v, want the breaker open", err)
	}
	if len(s.sent) != 3 {
		t.Fatalf("%d writes sent, want 3 (none while open)", len(s.sent))
	}
}

// Bad input is refused before anything is sent.
func TestBoundsOnPenalizeBatchAndShardKeys(t *testing.T) {
	now := time.UnixMicro(1_000_000_000)
	l, err := New(unreachable{t}, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := Bucket{Key: "k", Limit: PerSecond(1e6, 1)}
	var ae *ArgumentError
	for _, until := range []time.Time{now.Add(MaxPenalty + time.Microsecond), time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if err := l.Penalize(ctx, b, until); !errors.As(err, &ae) || ae.Field != "until" {
			t.Fatalf("Penalize(%v) = %v, want an ArgumentError on until", until, err)
		}
	}
	for _, n := range []int{MaxBatch + 1, 1 << 30} {
		if _, err := l.ReserveBatch(ctx, b, BatchRequest{N: n, MaxDelay: time.Hour, Partial: true}); !errors.As(err, &ae) || ae.Field != "n" {
			t.Fatalf("ReserveBatch(N=%d) = %v, want an ArgumentError on n", n, err)
		}
	}
	if ShardKey("a", 1) == "a#s1" {
		t.Fatal(`ShardKey("a", 1) is the plain key "a#s1"`)
	}
	for _, key := range []string{"a" + ShardSeparator, ShardSeparator + "1", "a" + ShardSeparator + "01", "a" + ShardSeparator + "1" + ShardSeparator + "2", "a" + ShardSeparator + "x"} {
		if err := (Bucket{Key: key, Limit: b.Limit}).Validate(); !errors.As(err, &ae) || ae.Field != "bucket.key" {
			t.Fatalf("Validate(%q) = %v, want an ArgumentError on bucket.key", key, err)
		}
	}
	for _, key := range []string{"a#s1", ShardKey("a", 0), ShardKey("a", 12)} {
		if err := (Bucket{Key: key, Limit: b.Limit}).Validate(); err != nil {
			t.Fatalf("Validate(%q) = %v, want valid", key, err)
		}
	}
}

// A Wait whose ctx deadline is nearer than n tokens' refill is a denial
// with a RetryAfter, not a request that can never be granted, and sends
// nothing.
func TestWaitDeadlineShorterThanTheWait(t *testing.T) {
	l, err := New(unreachable{t})
	if err != nil {
		t.Fatal(err)
	}
	b := Bucket{Key: "k", Limit: PerSecond(1, 1)} // 2 tokens: the slot is 1s ahead at best
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = l.Wait(ctx, b, 2, 10*time.Second)
	wait, ok := RetryAfter(err)
	if !ok || wait <= 0 || errors.Is(err, ErrNeverGrantable) {
		t.Fatalf("Wait = %v, want ErrExhausted with a RetryAfter, not ErrNeverGrantable", err)
	}
	// Past maxWait itself it is never grantable, as before.
	if _, err := l.Wait(context.Background(), b, 3, time.Second); !errors.Is(err, ErrNeverGrantable) {
		t.Fatalf("Wait(n=3, maxWait 1s) = %v, want ErrNeverGrantable", err)
	}
}

// The denial cache answers locally only from a recent tat at the booked
// horizon, which no Reset lowers; an older entry's denial is confirmed by a
// write, which sees a deleted item, and so is a denial from a penalty above
// the booked horizon, however recent, which sees a Reset.
func TestDenialCacheAgeIsBounded(t *testing.T) {
	now := time.UnixMicro(1_000_000_000)
	clock := func() time.Time { return now }
	b := Bucket{Key: "k", Limit: PerSecond(10, 2)}
	s := &scripted{unreachable: unreachable{t}}
	l, err := New(s, WithClock(clock), WithDenialCacheAge(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l.seen.book("k", now.UnixMicro()+600_000_000, now.UnixMicro()) // booked 10 min ahead
	if _, err := l.Take(context.Background(), b, 1); !errors.Is(err, ErrExhausted) || len(s.sent) != 0 {
		t.Fatalf("fresh entry: %v after %d writes, want a local denial", err, len(s.sent))
	}
	now = now.Add(time.Second + time.Microsecond)
	s.steps = append(s.steps, failWith(item(0, "")), func(_ context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		if isBusy(in) {
			t.Fatal("after learning the item was deleted, the busy form again")
		}
		return &dynamodb.UpdateItemOutput{Attributes: item(mustInt(t, value(in, ":next")), value(in, ":cid"))}, nil
	})
	if r, err := l.Take(context.Background(), b, 1); err != nil || len(s.sent) != 2 || !r.Slot.Equal(now) {
		t.Fatalf("stale entry after a deletion: %+v %v after %d writes, want granted now in 2", r, err, len(s.sent))
	}

	// Penalized for 10 min just now (tat far above the booked horizon);
	// a Reset lowered tat back to the horizon, which the write sees.
	l.seen.observe("k", now.UnixMicro()+600_000_000, now.UnixMicro())
	horizon := now.UnixMicro() + 100_000 // the grant above
	s.steps = append(s.steps, failWith(item(horizon, "")), func(_ context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return &dynamodb.UpdateItemOutput{Attributes: item(horizon+100_000, value(in, ":cid"))}, nil
	})
	if r, err := l.Take(context.Background(), b, 1); err != nil || len(s.sent) != 4 || !r.Slot.Equal(now) {
		t.Fatalf("fresh penalty after a reset: %+v %v after %d writes, want granted now in 2 more", r, err, len(s.sent))
	}
}

// Penalize leaves tat alone only where booked slots already empty the
// bucket past until, which no Reset undoes, and still writes the silence
// there (those slots were booked before it); a penalty it saw before may
// have been reset since, so a new one is written whole.
func TestPenaltyWritesOnlyTheSilenceWhenBookedSlotsCoverIt(t *testing.T) {
	now := time.UnixMicro(1_000_000_000)
	b := Bucket{Key: "k", Limit: PerSecond(10, 2)} // burst·T = 200 ms
	s := &scripted{unreachable: unreachable{t}}
	l, err := New(s, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return &dynamodb.UpdateItemOutput{}, nil
	}
	l.seen.book("k", now.UnixMicro()+10_000_000, now.UnixMicro()) // booked 10 s ahead
	s.steps = append(s.steps, ok)
	until := now.Add(5 * time.Second)
	if err := l.Penalize(context.Background(), b, until); err != nil || len(s.sent) != 1 {
		t.Fatalf("penalty within the booked slots: %v after %d writes, want 1 (the silence)", err, len(s.sent))
	}
	if in := s.sent[0]; aws.ToString(in.UpdateExpression) != "SET #su = :u" || value(in, ":u") != fmt.Sprint(until.UnixMicro()) {
		t.Fatalf("penalty within the booked slots wrote %q with :u %s, want the silence alone, until %d", aws.ToString(in.UpdateExpression), value(in, ":u"), until.UnixMicro())
	}
	l.seen.observe("k", now.UnixMicro()+60_200_000, now.UnixMicro()) // a 60 s penalty seen just now
	s.steps = append(s.steps, ok)
	if err := l.Penalize(context.Background(), b, now.Add(30*time.Second)); err != nil || len(s.sent) != 2 {
		t.Fatalf("penalty under one seen before: %v after %d writes, want 2 (a Reset may have dropped the old one)", err, len(s.sent))
	}
	if in := s.sent[1]; aws.ToString(in.UpdateExpression) != "SET #tat = :p, #ttl = :ttl, #su = :u" {
		t.Fatalf("penalty under one seen before wrote %q, want tat and the silence", aws.ToString(in.UpdateExpression))
	}
}
