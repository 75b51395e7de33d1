package limiter_test

import (
	"context"
	"errors"
	"log"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// A vendor that allows 3 concurrent requests per credential (SiteMinder
// pmsXchange): the token first, then a lease, held from just before the
// request until its answer. A busy lease is a denial like an empty bucket.
func ExampleLeaseGate() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	lim, err := limiter.New(dynamodb.NewFromConfig(awsCfg))
	if err != nil {
		log.Fatal(err)
	}
	gate := limiter.NewLeaseGate(lim) // one per process
	bucket := limiter.Bucket{Key: "siteminder#cred-7#availability", Limit: limiter.PerMinute(40, 5)}
	inFlight := limiter.InFlight{
		Key:     bucket.Key,
		Max:     3,                // max_in_flight
		Hold:    60 * time.Second, // the crash bound: a dead worker's lease frees itself after this
		Timeout: 20 * time.Second, // the push's timeout; a lease with this much left passes on with no write
	}

	if _, err := lim.Wait(ctx, bucket, 1, 10*time.Second); err != nil {
		return // defer the job (limiter.RetryAfter(err) says when)
	}
	lease, err := gate.Wait(ctx, inFlight, 5*time.Second)
	if errors.Is(err, limiter.ErrExhausted) {
		wait, _ := limiter.RetryAfter(err) // the earliest expiry, or the push's Timeout if sooner
		_ = wait                           // defer the job; the token is spent, as for a failed push
		return
	}
	if err != nil {
		return
	}
	defer func() { _ = gate.Release(context.WithoutCancel(ctx), lease) }()
	pctx, cancel := context.WithDeadline(ctx, lease.Deadline(time.Now(), inFlight.Timeout))
	defer cancel()
	req, _ := http.NewRequestWithContext(pctx, http.MethodPost, "https://vendor.example/ari", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}
