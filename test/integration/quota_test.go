package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

func amsterdamQuota(t *testing.T, count int) gcra.Quota {
	t.Helper()
	q, err := gcra.LoadQuota(count, "day", "Europe/Amsterdam")
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// quotaUsed reads the stored count (qn) of key's quota item, 0 for none.
func quotaUsed(t *testing.T, db *dynamodb.Client, table, key string) int {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{limiter.KeyAttribute: &types.AttributeValueMemberS{Value: limiter.QuotaKey(key)}}})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := out.Item["qn"].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(v.Value)
	return n
}

// Around the spring-forward night in Amsterdam: 3 a local day, a denial
// sends the caller to the local midnight plus its spread, and the new day
// grants 3 again; one write per grant, two for the first of a day, one
// per denial.
func TestQuotaOnTheStoreResetsAtTheVendorsMidnight(t *testing.T) {
	t.Parallel()
	ddb := emulator.DynamoDB(t)
	table := emulator.NewTable(t, ddb)
	clock := newClock()
	w := newWorker(t, table, limiter.WithClock(clock.Now))
	q := limiter.QuotaBucket{Key: "hotelbeds#eval-key#availability", Quota: amsterdamQuota(t, 3)}
	ctx := context.Background()
	midnight := time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC) // 00:00 CET on the 23-hour day

	take := func(at time.Time, id string) (limiter.QuotaGrant, int64, error) {
		clock.Set(at)
		before := w.calls.Answered()
		g, err := w.TakeQuota(ctx, q, 1, id)
		return g, w.calls.Answered() - before, err
	}
	day1 := time.Date(2026, 3, 28, 10, 0, 0, 0, time.UTC)
	for i := range 3 {
		g, writes, err := take(day1.Add(time.Duration(i)*time.Minute), fmt.Sprint("job-", i))
		if err != nil || g.Remaining != 2-i || !g.Reset.Equal(midnight) {
			t.Fatalf("take %d: %+v, %v; want %d left until %v", i, g, err, 2-i, midnight)
		}
		if want := int64(1) + int64(boolInt(i == 0)); writes != want {
			t.Errorf("take %d cost %d writes, want %d", i, writes, want)
		}
	}
	_, writes, err := take(time.Date(2026, 3, 28, 22, 59, 0, 0, time.UTC), "job-late")
	wait, denied := limiter.RetryAfter(err)
	if !denied || writes != 1 {
		t.Fatalf("the 4th take: %v after %d writes, want a denial in 1", err, writes)
	}
	if want := time.Minute + gcra.Spread("job-late"); wait != want {
		t.Errorf("retry after %v, want a minute to midnight plus the job's spread %v", wait, want)
	}
	for i := range 3 {
		g, _, err := take(midnight.Add(gcra.Spread(fmt.Sprint("new-", i))), fmt.Sprint("new-", i))
		if err != nil || g.Remaining != 2-i {
			t.Fatalf("new day, take %d: %+v, %v", i, g, err)
		}
	}
	if _, _, err := take(midnight.Add(23*time.Hour-time.Second), "x"); !errors.Is(err, limiter.ErrExhausted) {
		t.Errorf("23:59:59 CEST on the short day: %v, want the quota spent", err)
	}
	if g, _, err := take(midnight.Add(23*time.Hour), "y"); err != nil || g.Remaining != 2 {
		t.Errorf("00:00 CEST, 23 hours after the last reset: %+v, %v; want a new day", g, err)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Eight workers, each its own client and limiter, race for a quota of 20:
// exactly 20 are granted, and the store counts 20.
func TestQuotaHoldsAcrossWorkers(t *testing.T) {
	t.Parallel()
	ddb := emulator.DynamoDB(t)
	table := emulator.NewTable(t, ddb)
	clock := newClock() // noon UTC: far from Amsterdam's midnight
	q := limiter.QuotaBucket{Key: "cred#day", Quota: amsterdamQuota(t, 20)}
	var granted, denied atomic.Int64
	var wg sync.WaitGroup
	for p := range 8 {
		w := newWorker(t, table, limiter.WithClock(clock.Now), limiter.WithMaxAttempts(8))
		wg.Go(func() {
			for i := range 5 {
				_, err := w.TakeQuota(context.Background(), q, 1, fmt.Sprintf("p%d-%d", p, i))
				switch {
				case err == nil:
					granted.Add(1)
				case errors.Is(err, limiter.ErrExhausted):
					denied.Add(1)
				default:
					t.Errorf("worker %d: %v", p, err)
				}
			}
		})
	}
	wg.Wait()
	if granted.Load() != 20 || denied.Load() != 20 {
		t.Errorf("%d granted, %d denied; want 20 and 20", granted.Load(), denied.Load())
	}
	if n := quotaUsed(t, ddb, table, q.Key); n != 20 {
		t.Errorf("the store counts %d, want 20", n)
	}
}

// A take whose answer is lost is recognised by its retry: one take, one
// count. The first take opens the window (writes 1 and 2); the second's
// first write (3) lands and its answer is lost.
func TestQuotaTakeWithALostAnswerCountsOnce(t *testing.T) {
	t.Parallel()
	ddb := emulator.DynamoDB(t)
	table := emulator.NewTable(t, ddb)
	var calls atomic.Int32
	db := &dynamotest.Faulty{DB: ddb, F: dynamotest.LoseResponses(func(op string) bool { return calls.Add(1) == 3 })}
	l, err := limiter.New(db, limiter.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	q := limiter.QuotaBucket{Key: "cred#day", Quota: gcra.Quota{Count: 5, Period: gcra.Hour}}
	for _, id := range []string{"a", "b"} {
		if _, err := l.TakeQuota(context.Background(), q, 1, id); err != nil {
			t.Fatalf("take %s: %v", id, err)
		}
	}
	if calls.Load() != 4 {
		t.Errorf("%d calls, want 4 (the lost answer's retry is the 4th)", calls.Load())
	}
	if n := quotaUsed(t, ddb, table, q.Key); n != 2 {
		t.Errorf("after two takes, one with a lost answer, the store counts %d, want 2", n)
	}
}

// Rate and quota in one transaction: a take the bucket refuses spends no
// quota, a take the quota refuses spends no token.
func TestQuotaComposesWithTheRateLimitInOneTransaction(t *testing.T) {
	t.Parallel()
	ddb := emulator.DynamoDB(t)
	table := emulator.NewTable(t, ddb)
	clock := newClock()
	t0 := clock.Now()
	w := newWorker(t, table, limiter.WithClock(clock.Now))
	ctx := context.Background()
	rate := limiter.Bucket{Key: "cred#availability", Limit: limiter.PerSecond(1, 2)}
	q := limiter.QuotaBucket{Key: "cred#availability", Quota: amsterdamQuota(t, 3)}
	take := func() error {
		_, err := w.TakeWithQuota(ctx, []limiter.Bucket{rate}, q, 1, "job")
		return err
	}
	for i := range 2 {
		if err := take(); err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
	}
	err := take()
	if d, ok := limiter.RetryAfter(err); !ok || d != time.Second {
		t.Fatalf("the bucket's burst spent: %v, want a denial for 1s", err)
	}
	if n := quotaUsed(t, ddb, table, q.Key); n != 2 {
		t.Errorf("a take the bucket refused spent quota: the store counts %d, want 2", n)
	}
	clock.Set(t0.Add(time.Second))
	if err := take(); err != nil {
		t.Fatalf("a second later: %v", err)
	}
	clock.Set(t0.Add(10 * time.Second))
	err = take()
	var ex *limiter.ExhaustedError
	if !errors.As(err, &ex) || ex.Key != limiter.QuotaKey(q.Key) {
		t.Fatalf("the quota spent: %v, want a denial by the quota", err)
	}
	// 12:00 UTC is 13:00 in Amsterdam: 11 hours to midnight, plus the spread.
	if want := 11*time.Hour - 10*time.Second + gcra.Spread("job"); ex.RetryAfter != want {
		t.Errorf("retry after %v, want %v", ex.RetryAfter, want)
	}
	st, err := w.State(ctx, rate)
	if err != nil || st.Tokens != 2 {
		t.Errorf("a take the quota refused spent tokens: %+v, %v; want the bucket full (2)", st, err)
	}
}
