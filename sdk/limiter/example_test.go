package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
)

// Example is compiled by go test and go vet, and the README's copy of it
// by test/readme, so neither drifts from the API; it needs a DynamoDB (or the local stack:
// eval "$(scripts/localstack.sh start)") to run, so it has no Output lines.
// The examples after it run, and their output is checked, on
// limitertest's in-memory limiter at a fixed time: *limiter.Limiter
// answers the same calls the same way from the fleet's shared table.
// They do not run *limiter.Limiter itself: it grants through conditional
// writes whose condition and update expressions DynamoDB evaluates, which
// limitertest does not (it keeps sdk/gcra's state in a map), and an
// in-memory DynamoDB that does (minidyn) would become a requirement of the
// SDK's module, inherited by every service that adopts the limiter
// (test/adopt checks that none is).

// The README's example: one bucket per (credential, endpoint), shared by
// every worker of the fleet; Reserve books a slot with one conditional write.
func Example() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx) // AWS_ENDPOINT_URL_DYNAMODB points it at the local stack
	if err != nil {
		log.Fatal(err)
	}
	db := dynamodb.NewFromConfig(awsCfg) // any limiter.DynamoDBAPI: wrap it for metrics or faults
	lim, err := limiter.New(db,
		limiter.WithTable("fleetbucket"),
		limiter.WithCircuitBreaker(3, 10*time.Second)) // optional: stop calling a dead store
	if err != nil {
		log.Fatal(err)
	}

	bucket := limiter.Bucket{
		Key:   "booking_com#cred-42#availability", // one bucket per (credential, endpoint)
		Limit: limiter.PerSecond(20, 40),          // rate 20/s, burst 40; travels with every call
	}

	// Reserve books the earliest slot within maxDelay: one DynamoDB write.
	r, err := lim.Reserve(ctx, bucket, 1, 15*time.Minute)
	switch {
	case err == nil && r.Delay(time.Now()) <= time.Second:
		time.Sleep(r.Delay(time.Now()))
		// a slot booked SilenceAfter (100 ms) or more ahead asks first: a 429
		// any worker met since silences the credential for the whole fleet
		if until, err := lim.Silence(ctx, bucket); err != nil || until.After(time.Now()) {
			break // silenced, or the store is out: defer the push
		}
		log.Print("push: the token is yours")
	case err == nil:
		// defer the push to r.Slot (sdk/pipeline/queue does it with SQS); ask
		// Silence there too, and Confirm r's Stamp on an adaptive bucket
	case errors.Is(err, limiter.ErrExhausted):
		wait, _ := limiter.RetryAfter(err) // exact: when the same request would fit
		log.Printf("booked 15 min ahead: ask again in %v", wait)
	case errors.Is(err, limiter.ErrContended):
		// lost every race to other workers: ask again now, after a short jitter
	case errors.Is(err, limiter.ErrUnavailable), errors.Is(err, limiter.ErrOutcomeUnknown):
		// fail closed: do not push, defer the work
	}
}

// t0 is the fixed time the runnable examples start at.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// exampleLimiter is the in-memory limiter the examples run on, on a clock
// that only Wait's sleeps and the example move.
func exampleLimiter() (*limitertest.Limiter, *limitertest.Clock) {
	clock := limitertest.NewClock(t0)
	return limitertest.New(limitertest.WithClock(clock.Now), limitertest.WithSleep(clock.Sleep)), clock
}

// rates is 5 requests a second with a burst of 10: T = 200ms.
var rates = limiter.Bucket{Key: "expedia#cred-7#rates", Limit: limiter.PerSecond(5, 10)}

// Take grants now or says exactly when the same request would fit.
func ExampleLimiter_Take() {
	lim, _ := exampleLimiter()
	ctx := context.Background()
	granted := 0
	for range 11 {
		_, err := lim.Take(ctx, rates, 1)
		if wait, denied := limiter.RetryAfter(err); denied {
			fmt.Printf("granted %d, then denied: retry in %v\n", granted, wait)
			break
		}
		granted++ // push now
	}
	// Output:
	// granted 10, then denied: retry in 200ms
}

// Reserve books the earliest slot within maxDelay, or says when the same
// reservation would fit; the caller pushes at the slot (or defers the push
// to it), asking Silence first when the slot lay SilenceAfter or more ahead.
func ExampleLimiter_Reserve() {
	lim, _ := exampleLimiter()
	ctx := context.Background()
	if _, err := lim.Take(ctx, rates, 10); err != nil { // the burst is spent
		log.Fatal(err)
	}
	r, err := lim.Reserve(ctx, rates, 1, time.Minute)
	fmt.Println("slot in", r.Delay(t0), err)
	_, err = lim.Reserve(ctx, rates, 3, 500*time.Millisecond)
	wait, _ := limiter.RetryAfter(err)
	fmt.Println("3 more within 500ms: retry in", wait)
	// Output:
	// slot in 200ms <nil>
	// 3 more within 500ms: retry in 300ms
}

// Wait reserves a slot and sleeps until it; it fails at once, spending
// nothing, if the slot is further than maxWait.
func ExampleLimiter_Wait() {
	lim, clock := exampleLimiter()
	ctx := context.Background()
	if _, err := lim.Take(ctx, rates, 10); err != nil {
		log.Fatal(err)
	}
	if _, err := lim.Wait(ctx, rates, 2, 2*time.Second); err == nil {
		fmt.Println("pushed after", clock.Now().Sub(t0))
	}
	if _, err := lim.Wait(ctx, rates, 1, 100*time.Millisecond); errors.Is(err, limiter.ErrExhausted) {
		wait, _ := limiter.RetryAfter(err)
		fmt.Println("no slot within 100ms: defer the work, retry in", wait)
	}
	// Output:
	// pushed after 400ms
	// no slot within 100ms: defer the work, retry in 100ms
}

// ReserveBatch books a Lambda batch's slots, one emission interval apart
// once the burst is spent, with one conditional write.
func ExampleLimiter_ReserveBatch() {
	lim, _ := exampleLimiter()
	b, err := lim.ReserveBatch(context.Background(), rates,
		limiter.BatchRequest{N: 13, MaxDelay: time.Minute, Partial: true})
	if err != nil {
		log.Fatal(err)
	}
	for i, slot := range b.Slots[8:] {
		fmt.Printf("job %d pushes at +%v\n", 8+i, slot.Sub(t0))
	}
	// Output:
	// job 8 pushes at +0s
	// job 9 pushes at +0s
	// job 10 pushes at +200ms
	// job 11 pushes at +400ms
	// job 12 pushes at +600ms
}

// Penalize empties the bucket for the whole fleet until a vendor's
// Retry-After; it refills gradually after, at the bucket's rate.
func ExampleLimiter_Penalize() {
	lim, clock := exampleLimiter()
	ctx := context.Background()
	if err := lim.Penalize(ctx, rates, t0.Add(30*time.Second)); err != nil {
		log.Print("penalty not recorded: ", err)
	}
	_, err := lim.Take(ctx, rates, 1)
	wait, _ := limiter.RetryAfter(err)
	fmt.Println("retry in", wait)
	clock.Advance(31 * time.Second)
	s, _ := lim.State(ctx, rates)
	fmt.Println("a second after the penalty:", s.Tokens, "tokens")
	// Output:
	// retry in 30.2s
	// a second after the penalty: 5 tokens
}

// A margin keeps rate·margin of the burst free, so that requests that
// reach the vendor later than their slot (store latency, scheduling) do
// not bunch past burst + rate·W in the vendor's windows; the rate is kept.
func ExampleLimit_margin() {
	lim, _ := exampleLimiter()
	bucket := limiter.Bucket{Key: "booking_com#cred-42#availability",
		Limit: limiter.Limit{Rate: 20, Burst: 40, Margin: 100 * time.Millisecond}}
	_, err := lim.Take(context.Background(), bucket, 39)
	fmt.Println(err)
	fmt.Println(bucket.Limit.Capacity(), "tokens at once")
	// Output:
	// invalid n: 39 exceeds the 38 tokens burst 40 less margin 100ms holds: it can never be granted
	// 38 tokens at once
}
