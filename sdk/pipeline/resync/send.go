package resync

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
)

// SQSAPI is the part of *sqs.Client Send uses.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Send validates r and sends it to the changes queue as a resync event,
// where the sync function marks its lanes at the bulk class. It is how
// the CLI, a connection enabled or remapped, and a repair that can wait (its
// drifted cells in r.Cells, each with its dates) start one. The event is
// the same on the changes bus (source "pms", detail-type "resync").
func Send(ctx context.Context, q SQSAPI, changesURL string, r ari.Resync, now time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	body, err := r.Event(now)
	if err != nil {
		return err
	}
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &changesURL, MessageBody: &body}); err != nil {
		return fmt.Errorf("send resync %q to the changes queue: %w", r.ResyncID, err)
	}
	return nil
}
