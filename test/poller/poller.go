// Package poller plays the part of Lambda's SQS event source mapping on the
// local stack: receive a batch, hand it to a handler, delete what the
// handler finished and leave the rest to come back after the visibility
// timeout.
package poller

import (
	"context"
	"fmt"
	"github.com/fleetbucket/fleetbucket/internal/ctxsleep"
	"sync"
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

// Poller receives from one queue and hands batches to up to Concurrency
// handlers at once, as the event source mapping fans batches out to
// concurrent invocations. One receive loop is enough: long polls are what
// an emulator finds expensive, not batches.
type Poller struct {
	SQS      SQSAPI
	QueueURL string
	// BatchSize is the most messages a batch holds; default 10. Above 10
	// (SQS hands out at most 10 per receive) it needs a Window, as an
	// event source mapping's does.
	BatchSize int32
	// Window is how long a batch keeps gathering after its first message
	// until it holds BatchSize, like MaximumBatchingWindowInSeconds; zero
	// hands out whatever one receive returned.
	Window time.Duration
	Wait   time.Duration // long-poll wait; default 1s
	// Visibility is how long a received message stays hidden; a failed
	// one reappears after it. Default 5s.
	Visibility time.Duration
	// ShortPoll receives with WaitTimeSeconds 0 and pauses this long when
	// the queue is empty. Use it with moto: its long poll only wakes for
	// messages sent during the wait, so a delayed message that becomes
	// visible meanwhile waits for the poll to end (up to Wait late), which
	// would make deferred pushes miss their slots.
	ShortPoll time.Duration
	// Concurrency is how many batches are handled at once; default 1.
	Concurrency int
	Handler     Handler
	// OnError, if set, sees receive, handler and delete errors (the poller
	// goes on).
	OnError func(error)
}

// Run polls until ctx ends, then waits for the batches in hand.
func (p *Poller) Run(ctx context.Context) {
	batches := make(chan []types.Message)
	var wg sync.WaitGroup
	for range orDefault(p.Concurrency, 1) {
		wg.Go(func() {
			for msgs := range batches {
				p.report(p.handle(ctx, msgs))
			}
		})
	}
	defer wg.Wait()
	defer close(batches)
	for ctx.Err() == nil {
		msgs, err := p.gather(ctx)
		if err != nil {
			p.report(err)
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		if len(msgs) > 0 {
			batches <- msgs
		} else if p.ShortPoll > 0 {
			sleep(ctx, p.ShortPoll)
		}
	}
}

// gather receives one batch: one receive, or, with a Window, receives
// until the batch is full or the window since its first message is over.
func (p *Poller) gather(ctx context.Context) ([]types.Message, error) {
	size := int(orDefault(p.BatchSize, 10))
	msgs, err := p.receive(ctx, size)
	if err != nil || len(msgs) == 0 || p.Window <= 0 {
		return msgs, err
	}
	end := time.Now().Add(p.Window)
	for len(msgs) < size && time.Now().Before(end) && ctx.Err() == nil {
		more, err := p.receive(ctx, size-len(msgs))
		if err != nil {
			// What is in hand is received: hand it out, and the next
			// gather reports the error if it lasts.
			break
		}
		if len(more) == 0 {
			sleep(ctx, min(orDefault(p.ShortPoll, 20*time.Millisecond), time.Until(end)))
		}
		msgs = unique(append(msgs, more...))
	}
	return msgs, nil
}

// Once receives and handles one batch.
func (p *Poller) Once(ctx context.Context) error {
	msgs, err := p.gather(ctx)
	if err != nil || len(msgs) == 0 {
		return err
	}
	return p.handle(ctx, msgs)
}

func (p *Poller) report(err error) {
	if err != nil && p.OnError != nil {
		p.OnError(err)
	}
}

func (p *Poller) receive(ctx context.Context, n int) ([]types.Message, error) {
	out, err := p.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &p.QueueURL,
		MaxNumberOfMessages:         int32(min(n, 10)),
		WaitTimeSeconds:             p.waitSeconds(),
		VisibilityTimeout:           int32(orDefault(p.Visibility, 5*time.Second) / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, err
	}
	return unique(out.Messages), nil
}

// unique drops repeats of a message within one batch. moto's threaded SQS
// server can list a message twice in one ReceiveMessage answer when a send
// to the same queue lands mid-scan; SQS never does, and handling both
// copies at once would spend the job's reserved slot twice.
func unique(msgs []types.Message) []types.Message {
	seen := make(map[string]bool, len(msgs))
	out := msgs[:0]
	for _, m := range msgs {
		id := aws.ToString(m.MessageId)
		if !seen[id] {
			seen[id] = true
			out = append(out, m)
		}
	}
	return out
}

// handle runs the handler on a batch and deletes what it finished.
func (p *Poller) handle(ctx context.Context, msgs []types.Message) error {
	failed, err := p.Handler(ctx, msgs)
	if err != nil {
		return fmt.Errorf("handler failed the batch of %d: %w", len(msgs), err)
	}
	keep := map[string]bool{}
	for _, id := range failed {
		keep[id] = true
	}
	var entries []types.DeleteMessageBatchRequestEntry
	for _, m := range msgs {
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

func (p *Poller) waitSeconds() int32 {
	if p.ShortPoll > 0 {
		return 0
	}
	return int32(orDefault(p.Wait, time.Second) / time.Second)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func sleep(ctx context.Context, d time.Duration) { _ = ctxsleep.Sleep(ctx, d) }
