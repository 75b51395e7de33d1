// Command sync is the Lambda function that keeps OTAs in step with the PMS.
// It consumes two SQS queues: PMS change events (from the EventBridge rule)
// and deferred push jobs. main only wires dependencies; the work is done by
// sdk/pipeline/syncer and sdk/pipeline/dispatch.
//
// env.go builds the pipeline from the function's environment
// (pipeline.New). handler.go's Invoke routes each invocation: an SQS batch
// to Handle, which hands its records to syncer.Syncer.HandleBatch (a record
// from the deferred queue is a push job, any other a change) and reports
// the records to redeliver; the stack's schedules to Sweep
// (syncer.Syncer.Sweep) and Parity (parity.go). A change that failed is
// sent again after a backoff (retry.go, syncer.Retry). sdk/pipeline's
// package doc follows a lane job from there.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	// A quota's time zone is loaded at start-up, and the provided.al2023
	// runtime has no zone database of its own.
	_ "time/tzdata"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h, err := newHandler(context.Background(), os.Getenv, log)
	if err != nil {
		// An init error fails every invocation with this message, visibly,
		// instead of pushing under a config nobody checked.
		fmt.Fprintf(os.Stderr, "sync: refusing to start: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(h.Invoke)
}
