package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// afterFirstWrite runs hook once, when the answer of the first UpdateItem
// sent after it was set is back and before the caller sees it: another
// process's 429 landing between a grant and its spending.
type afterFirstWrite struct {
	limiter.DynamoDBAPI
	once sync.Once
	hook func()
}

func (a *afterFirstWrite) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := a.DynamoDBAPI.UpdateItem(ctx, in, opts...)
	if err == nil && a.hook != nil {
		a.once.Do(a.hook)
	}
	return out, err
}

// A slot booked before a 429 is not spent inside the silence its
// Retry-After asked for, on the emulator: a Wait books a slot a second
// ahead; before it comes, another process meets a 429 asking 30 s of
// silence and penalizes the bucket; the Wait, waking at its slot, must not
// hand the slot out. Its maxWait (5 s) ends before the silence does, so it
// reports the bucket exhausted, with a wait that reaches past the silence.
// The same where the penalizing process had booked slots past the
// penalty (it then writes only the silence). And a Reset (an operator's
// undo) ends the silence for a slot booked before it.
func TestSlotBookedBeforeA429IsNotSpentInItsSilence(t *testing.T) {
	db := emulator.DynamoDB(t)
	table := emulator.NewTable(t, db)
	clock := newClock()
	ctx := context.Background()
	b := limiter.Bucket{Key: "booking_com#cred-silence#availability", Limit: limiter.PerSecond(1, 1)} // T = 1 s
	other := newWorker(t, table, limiter.WithClock(clock.Now))
	// waitAcross is a Wait on a bucket just emptied (its slot a second
	// ahead), with between its grant and its slot what another process
	// does (between), at its clock's reading then.
	waitAcross := func(between func()) (limiter.Reservation, time.Time, error) {
		t.Helper()
		hooked := &afterFirstWrite{DynamoDBAPI: db}
		waiter, err := limiter.New(hooked, limiter.WithTable(table), limiter.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := waiter.Take(ctx, b, 1); err != nil {
			t.Fatal(err)
		}
		t0 := clock.Now()
		hooked.hook = func() {
			clock.Set(t0.Add(200 * time.Millisecond))
			between()
			clock.Set(t0.Add(time.Second)) // the slot comes
		}
		r, err := waiter.Wait(ctx, b, 1, 5*time.Second)
		return r, t0, err
	}

	// Another process meets a 429 with Retry-After 30 s.
	var until time.Time
	r, t0, err := waitAcross(func() {
		until = clock.Now().Add(30 * time.Second)
		if err := other.Penalize(ctx, b, until); err != nil {
			t.Errorf("penalize: %v", err)
		}
	})
	wait, denied := limiter.RetryAfter(err)
	// Wait's RetryAfter counts from the end of its maxWait: 5 s from t0,
	// the slot's second gone.
	next := clock.Now().Add(4*time.Second + wait)
	switch {
	case err == nil:
		t.Fatalf("Wait handed out slot t0+%v, inside the silence a 429 asked for until t0+%v", r.Slot.Sub(t0), until.Sub(t0))
	case !denied:
		t.Fatalf("Wait: %v, want the bucket exhausted until the silence ends", err)
	case next.Before(until):
		t.Fatalf("Wait denied until t0+%v, before the silence ends at t0+%v", next.Sub(t0), until.Sub(t0))
	}

	// The same where the process that meets the 429 has booked slots
	// past the penalty (adversary seed 15: a slot booked 8 s ahead, a
	// Retry-After of 1 s): its bucket is already empty past the penalty,
	// so only the silence is written, and the Wait's slot is still inside
	// it.
	clock.Set(until.Add(time.Minute))
	r, t0, err = waitAcross(func() {
		booked, err := other.ReserveBatch(ctx, b, limiter.BatchRequest{N: 5, MaxDelay: 10 * time.Second})
		if err != nil || len(booked.Slots) != 5 {
			t.Errorf("booking ahead: %+v %v", booked, err)
		}
		until = clock.Now().Add(3 * time.Second)
		if err := other.Penalize(ctx, b, until); err != nil {
			t.Errorf("penalize: %v", err)
		}
	})
	wait, denied = limiter.RetryAfter(err)
	next = clock.Now().Add(4*time.Second + wait)
	switch {
	case err == nil:
		t.Fatalf("Wait handed out slot t0+%v, inside the silence a 429 asked for until t0+%v (slots booked past it)", r.Slot.Sub(t0), until.Sub(t0))
	case !denied:
		t.Fatalf("Wait: %v, want the bucket exhausted until the silence ends (slots booked past it)", err)
	case next.Before(until):
		t.Fatalf("Wait denied until t0+%v, before the silence ends at t0+%v (slots booked past it)", next.Sub(t0), until.Sub(t0))
	}

	// Past it, the same with an operator's Reset after the penalty: the
	// silence is undone with it, and the slot is spent.
	clock.Set(until.Add(time.Minute))
	r, t0, err = waitAcross(func() {
		if err := other.Penalize(ctx, b, clock.Now().Add(30*time.Second)); err != nil {
			t.Errorf("penalize: %v", err)
		}
		if err := other.Reset(ctx, b); err != nil {
			t.Errorf("reset: %v", err)
		}
	})
	if err != nil || !r.Slot.Equal(t0.Add(time.Second)) {
		t.Fatalf("a slot booked before a penalty an operator reset: %+v %v, want its slot t0+1s", r, err)
	}
}

// afterFirstTransaction runs hook once, when the answer of the first
// TransactWriteItems sent after it was set is back and before the caller
// sees it: another process's 429 landing between a multi-bucket grant and
// its spending.
type afterFirstTransaction struct {
	*dynamodb.Client
	once sync.Once
	hook func()
}

func (a *afterFirstTransaction) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := a.Client.TransactWriteItems(ctx, in, opts...)
	if err == nil && a.hook != nil {
		a.once.Do(a.hook)
	}
	return out, err
}

// The same for a WaitMulti's common slot, on the emulator (a later message
// of a push on a limits[] route waits for every bucket at once: adversary
// seed 39 sent one 2 s after a 429 asking 5 s of silence). The slot is
// booked a second ahead; before it comes, another process penalizes the
// route's first bucket for 30 s; WaitMulti must not hand the slot out, and
// its maxWait (5 s) ending before the silence does, reports the buckets
// exhausted. Past it, a slot booked at once is spent with no read.
func TestWaitMultiSlotBookedBeforeA429IsNotSpentInItsSilence(t *testing.T) {
	db := emulator.DynamoDB(t)
	table := emulator.NewTable(t, db)
	clock := newClock()
	ctx := context.Background()
	perSecond := limiter.Bucket{Key: "booking_com#cred-silence-multi#availability", Limit: limiter.PerSecond(1, 1)} // T = 1 s
	perMinute := limiter.Bucket{Key: "booking_com#cred-silence-multi#availability#w0", Limit: limiter.Limit{Rate: 1, Burst: 40}}
	both := []limiter.Bucket{perSecond, perMinute}
	other := newWorker(t, table, limiter.WithClock(clock.Now))
	hooked := &afterFirstTransaction{Client: db}
	waiter, err := limiter.New(hooked, limiter.WithTable(table), limiter.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.TakeMulti(ctx, both, 1); err != nil {
		t.Fatal(err)
	}
	t0 := clock.Now()
	until := t0.Add(30 * time.Second)
	hooked.hook = func() {
		clock.Set(t0.Add(200 * time.Millisecond))
		if err := other.Penalize(ctx, perSecond, until); err != nil {
			t.Errorf("penalize: %v", err)
		}
		clock.Set(t0.Add(time.Second)) // the slot comes
	}
	r, err := waiter.WaitMulti(ctx, both, 1, 5*time.Second)
	wait, denied := limiter.RetryAfter(err)
	next := clock.Now().Add(4*time.Second + wait)
	switch {
	case err == nil:
		t.Fatalf("WaitMulti handed out slot t0+%v, inside the silence a 429 asked for until t0+%v", r.Slot.Sub(t0), until.Sub(t0))
	case !denied:
		t.Fatalf("WaitMulti: %v, want the buckets exhausted until the silence ends", err)
	case next.Before(until):
		t.Fatalf("WaitMulti denied until t0+%v, before the silence ends at t0+%v", next.Sub(t0), until.Sub(t0))
	}

	clock.Set(until.Add(time.Minute))
	t1 := clock.Now()
	r, err = waiter.WaitMulti(ctx, both, 1, 5*time.Second)
	if err != nil || !r.Slot.Equal(t1) {
		t.Fatalf("past the silence: %+v %v, want the slot at once", r, err)
	}
}
