package resync

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
)

// SQSAPI is the part of *sqs.Client Send uses.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Send validates r and sends it to the changes queue as a resync event,
// where the sync function marks its lanes at the bulk class. It is how
// the CLI and a repair that can wait (its drifted cells in r.Cells, each
// with its dates) start one. The event is the same on the changes bus
// (source "pms", detail-type "resync").
func Send(ctx context.Context, q SQSAPI, changesURL string, r ari.Resync, now time.Time) error {
	return SendAfter(ctx, q, changesURL, r, now, 0)
}

// TriggerDelay is how long the resync a connection's write calls for
// (Trigger) waits on the changes queue before a worker takes it: every
// worker reads connections through a cache up to
// connections.DefaultMaxAge old, and a resync planned or pushed on the
// mapping from before the write skips, or dead-letters as unmapped, the
// very cells the write mapped (adversary seed 820: a mapping put back,
// its resync skipping every cell of the code it mapped). A second more
// for the clocks.
const TriggerDelay = connections.DefaultMaxAge + time.Second

// SendAfter is Send with the event held on the queue for delay (SQS's
// DelaySeconds, in whole seconds up, at most 15 minutes): a connection's
// write sends its resync TriggerDelay after it.
func SendAfter(ctx context.Context, q SQSAPI, changesURL string, r ari.Resync, now time.Time, delay time.Duration) error {
	if err := r.Validate(); err != nil {
		return err
	}
	secs := int32((delay + time.Second - 1) / time.Second)
	if delay < 0 || secs > 900 {
		return fmt.Errorf("resync %q: a delay of %v, want 0 to 15m (SQS's DelaySeconds)", r.ResyncID, delay)
	}
	body, err := r.Event(now)
	if err != nil {
		return err
	}
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &changesURL, MessageBody: &body, DelaySeconds: secs}); err != nil {
		return fmt.Errorf("send resync %q to the changes queue: %w", r.ResyncID, err)
	}
	return nil
}
