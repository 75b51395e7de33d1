package limiter_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// These examples are compiled by go test and go vet, so the README, which
// copies the first one, cannot drift from the API. They need a DynamoDB (or
// the local stack: eval "$(scripts/localstack.sh start)") to run, so they
// have no Output lines.

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
		time.Sleep(r.Delay(time.Now())) // then push: the token is yours
	case err == nil:
		// defer the push to r.Slot (sdk/pipeline/queue does it with SQS)
	case errors.Is(err, limiter.ErrExhausted):
		wait, _ := limiter.RetryAfter(err) // exact: when the same request would fit
		_ = wait
	case errors.Is(err, limiter.ErrContended):
		// lost every race to other workers: ask again now, after a short jitter
	case errors.Is(err, limiter.ErrUnavailable), errors.Is(err, limiter.ErrOutcomeUnknown):
		// fail closed: do not push, defer the work
	}
}

var (
	lim    *limiter.Limiter
	bucket = limiter.Bucket{Key: "expedia#cred-7#rates", Limit: limiter.PerSecond(5, 10)}
)

// Take grants now or says exactly when the same request would fit.
func ExampleLimiter_Take() {
	if _, err := lim.Take(context.Background(), bucket, 1); err != nil {
		wait, ok := limiter.RetryAfter(err)
		log.Printf("denied (exhausted %v), retry in %v", ok, wait)
		return
	}
	// push now
}

// Wait reserves a slot and sleeps until it; it fails at once if the slot
// is further than maxWait.
func ExampleLimiter_Wait() {
	if _, err := lim.Wait(context.Background(), bucket, 1, 2*time.Second); err != nil {
		log.Print("no slot within 2s: defer the work: ", err)
		return
	}
	// push now
}

// ReserveBatch books a Lambda batch's slots, one emission interval apart,
// with one conditional write.
func ExampleLimiter_ReserveBatch() {
	b, err := lim.ReserveBatch(context.Background(), bucket,
		limiter.BatchRequest{N: 10, MaxDelay: time.Minute, Partial: true})
	if err != nil {
		log.Fatal(err)
	}
	for i, slot := range b.Slots {
		log.Printf("job %d pushes at %v", i, slot)
	}
}

// Penalize empties the bucket for the whole fleet until a vendor's
// Retry-After; it refills gradually after.
func ExampleLimiter_Penalize() {
	until := time.Now().Add(30 * time.Second)
	if err := lim.Penalize(context.Background(), bucket, until); err != nil {
		log.Print("penalty not recorded: ", err)
	}
}
