// Package poller plays the part of Lambda's SQS event source mapping on the
// local stack: receive a batch, hand it to a handler, delete what the
// handler finished and leave the rest to come back after the visibility
// timeout.
package poller

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of *sqs.Client a poller uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Handler processes a batch and returns the ids of the messages that
// failed (to be left on the queue), like a Lambda's batchItemFailures. An
// error fails the whole batch.
type Handler func(ctx context.Context, msgs []types.Message) (failed []string, err error)

// Poller receives from one queue.
type Poller struct {
	SQS       SQSAPI
	QueueURL  string
	BatchSize int32         // 1..10; default 10
	Wait      time.Duration // long-poll wait; default 1s
	// Visibility is how long a received message stays hidden; a failed
	// one reappears after it. Default 5s.
	Visibility time.Duration
	Handler    Handler
	// OnError, if set, sees receive and delete errors (the poller goes on).
	OnError func(error)
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := p.Once(ctx); err != nil && ctx.Err() == nil {
			if p.OnError != nil {
				p.OnError(err)
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}
}

// Once receives and handles one batch.
func (p *Poller) Once(ctx context.Context) error {
	out, err := p.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &p.QueueURL,
		MaxNumberOfMessages:         orDefault(p.BatchSize, 10),
		WaitTimeSeconds:             int32(orDefault(p.Wait, time.Second) / time.Second),
		VisibilityTimeout:           int32(orDefault(p.Visibility, 5*time.Second) / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil || len(out.Messages) == 0 {
		return err
	}
	failed, err := p.Handler(ctx, out.Messages)
	if err != nil {
		return fmt.Errorf("handler failed the batch of %d: %w", len(out.Messages), err)
	}
	keep := map[string]bool{}
	for _, id := range failed {
		keep[id] = true
	}
	var entries []types.DeleteMessageBatchRequestEntry
	for _, m := range out.Messages {
		if !keep[aws.ToString(m.MessageId)] {
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: m.MessageId, ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(entries) == 0 {
		return nil
	}
	// The messages are done with: delete them even if ctx has just ended.
	del, err := p.SQS.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: &p.QueueURL, Entries: entries})
	if err != nil {
		return fmt.Errorf("delete %d handled messages: %w", len(entries), err)
	}
	if len(del.Failed) > 0 {
		return fmt.Errorf("delete: %d of %d handled messages not deleted: %s", len(del.Failed), len(entries), aws.ToString(del.Failed[0].Message))
	}
	return nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
