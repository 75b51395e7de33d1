package integration

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// An adaptive bucket's item must outlive the climb of the state it holds,
// whichever write changed it last: a throttle that finds the bucket booked
// past its penalty (the keep form), a penalty from a process that has seen
// nothing, a lower published limit and a raised one. Each expiry is checked
// against the end of the climb the test works out by hand from the rates it
// set; then the test expires the item as DynamoDB's TTL would, and a fresh
// worker, after the fleet was idle, still grants at the learned rate.
func TestLearnedRateOutlivesItsClimb(t *testing.T) {
	t.Parallel()
	db := emulator.DynamoDB(t)
	// 20/s burst 2; quiet 10 s, then 1/s more per second.
	f := newAdaptiveFleet(t, db, "booking_com#cred-1#rates", 2)
	table, clock, t0, b, at := f.table, f.clock, f.t0, f.b, f.at
	a := f.worker(t)
	ctx := context.Background()
	key := map[string]types.AttributeValue{limiter.KeyAttribute: &types.AttributeValueMemberS{Value: b.Key}}
	expiry := func() time.Time {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := out.Item[limiter.TTLAttribute].(*types.AttributeValueMemberN)
		if !ok {
			t.Fatalf("item %v has no ttl", out.Item)
		}
		s, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.Unix(s, 0)
	}
	outlives := func(step string, climbEnds time.Duration) {
		t.Helper()
		if got := expiry(); got.Before(t0.Add(climbEnds)) {
			t.Errorf("after %s the item expires at t0+%v, before its climb ends at t0+%v", step, got.Sub(t0), climbEnds)
		}
	}

	// A books 2 s ahead at 20/s: tat is past what the throttle below needs.
	var last limiter.Reservation
	for range 40 {
		r, err := a.Reserve(ctx, b, 1, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	// A 429 with Retry-After 0.5 s halves to 10/s; the bucket is already
	// empty past 0.5 s + 2 × 100 ms, so tat stays. Quiet until 10.5 s,
	// then 10 s of climb to 20/s: 20.5 s.
	if err := a.Throttle(ctx, b, stampOf(last), t0.Add(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	outlives("a throttle that kept tat", 20500*time.Millisecond)

	// A process that has seen nothing penalizes the bucket at 3 s, until
	// 4 s: the learned state is unchanged and must stay remembered.
	at(3 * time.Second)
	fresh := newWorker(t, table, limiter.WithClock(clock.Now))
	if err := fresh.Penalize(ctx, b, t0.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	outlives("a penalty from a process that saw nothing", 20500*time.Millisecond)

	// The vendor publishes 5/s at 5 s: capped there, no climb, quiet to 15 s.
	at(5 * time.Second)
	if err := a.Publish(ctx, b, 5); err != nil {
		t.Fatal(err)
	}
	outlives("a lower published limit", 15*time.Second)
	// It lifts the cap at 6 s: the climb resumes at once from 5/s to the
	// configured 20/s, 1/s per second: it ends at 21 s.
	at(6 * time.Second)
	if err := a.Publish(ctx, b, 25); err != nil {
		t.Fatal(err)
	}
	outlives("a raised published limit", 21*time.Second)

	// The fleet is idle until 19 s; DynamoDB's TTL deletes what expired.
	at(19 * time.Second)
	if expiry().Before(clock.Now()) {
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key}); err != nil {
			t.Fatal(err)
		}
		t.Logf("the item expired before t0+19s and was deleted, as DynamoDB's TTL would")
	}
	// 13 s into the climb from 5/s: a fresh worker grants at 18/s, not at
	// the configured 20/s a forgotten state would give.
	r, err := newWorker(t, table, limiter.WithClock(clock.Now)).Take(ctx, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.Rate-18) > 0.01 {
		t.Fatalf("a fresh worker at t0+19s grants at %.3g/s, want 18/s (13 s into the climb from 5/s)", r.Rate)
	}
}

// A change that leaves tat where it is now sets the TTL too, and must never
// set one before tat (a deleted item is a full bucket: a burst too early).
// Worker W saw tat 2 s ahead; A then books 20 s ahead; W's lower published
// limit finds the bucket already emptied past its floor (the keep form)
// but further ahead than W knew: the TTL it first computes fails the
// condition, and the one it sends again covers the tat the answer showed.
func TestAdaptiveChangeNeverExpiresBeforeTat(t *testing.T) {
	t.Parallel()
	db := emulator.DynamoDB(t)
	f := newAdaptiveFleet(t, db, "booking_com#cred-1#rates", 2)
	table, t0, b := f.table, f.t0, f.b
	a, w := f.worker(t), f.worker(t)
	ctx := context.Background()
	for range 40 { // 2 s at 20/s
		if _, err := a.Reserve(ctx, b, 1, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := w.Reserve(ctx, b, 1, 5*time.Second); err != nil || r.Slot.Sub(t0) < 1900*time.Millisecond {
		t.Fatalf("W's slot %v, %v; want one about 2 s ahead", r.Slot.Sub(t0), err)
	}
	for range 360 { // 18 s more
		if _, err := a.Reserve(ctx, b, 1, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	before := w.calls.Answered()
	if err := w.Publish(ctx, b, 10); err != nil {
		t.Fatal(err)
	}
	if n := w.calls.Answered() - before; n != 2 {
		t.Errorf("W's publish sent %d writes, want 2 (one refused for a tat past its TTL, one that covers it)", n)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{limiter.KeyAttribute: &types.AttributeValueMemberS{Value: b.Key}}})
	if err != nil {
		t.Fatal(err)
	}
	num := func(name string) int64 {
		v, _ := out.Item[name].(*types.AttributeValueMemberN)
		if v == nil {
			t.Fatalf("item %v has no %s", out.Item, name)
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	tat, ttl := time.UnixMicro(num(limiter.TATAttribute)), time.Unix(num(limiter.TTLAttribute), 0)
	if tat.Sub(t0) < 19*time.Second {
		t.Fatalf("tat at t0+%v, want about 20 s ahead", tat.Sub(t0))
	}
	if ttl.Before(tat) {
		t.Errorf("the item expires at t0+%v, before its tat at t0+%v", ttl.Sub(t0), tat.Sub(t0))
	}
	if st, err := w.State(ctx, b); err != nil || math.Abs(st.Rate-10) > 1e-9 {
		t.Errorf("after the published 10/s: %+v, %v; want 10/s", st, err)
	}
}
