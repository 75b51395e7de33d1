// Package dlq reads fleetbucket's dead-letter queue and moves its messages
// back to the queue they belong on, for the operator CLI.
//
// The dead-letter queue takes messages from several producers: the sync
// function dead-letters malformed PMS change events, shed and expired push
// jobs and vendor refusals with their reason in the message attribute
// queue.ReasonAttribute; SQS itself moves messages there (with no reason)
// from the changes and deferred queues after maxReceiveCount. A message's
// body says where it came from: a PMS change event is an EventBridge
// envelope ("source" and "detail"), a push job is the job's JSON ("v" and
// "id"). A lane push the vendor refused, or that gave up after its retries,
// is dead-lettered as its lane's push job, naming the lane in its id
// (property#kind#channel#credential#hotel_ref@owner): the lane kept its
// changes, and the job moved back pushes them again. Anything else (a push
// body an older version dead-lettered, say) has no queue to go back to and
// stays.
//
// Reading a message hides it for a visibility timeout; List and a dry-run
// Redrive make every message they kept visible again before they return,
// so neither removes anything.
package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
)

// SQSAPI is the part of *sqs.Client this package uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Kind is what a dead-lettered message is, by its body.
type Kind string

const (
	// Change is a PMS change event: it goes back to the changes queue.
	Change Kind = "change"
	// Job is a push job: it goes back to the deferred queue.
	Job Kind = "job"
	// Unknown is anything else; it stays in the dead-letter queue.
	Unknown Kind = "unknown"
)

// Classify tells a message's kind from its body.
func Classify(body string) Kind {
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &fields) != nil {
		return Unknown
	}
	has := func(k string) bool { _, ok := fields[k]; return ok }
	switch {
	case has("v") && has("id"):
		return Job
	case has("source") && has("detail"):
		return Change
	}
	return Unknown
}

// Message is one dead-lettered message.
type Message struct {
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Reason is the producer's queue.ReasonAttribute; empty for a
	// message SQS moved after maxReceiveCount.
	Reason   string    `json:"reason"`
	Sent     time.Time `json:"sent,omitzero"`
	Receives int       `json:"receives"`
	Body     string    `json:"body"`
	receipt  string
}

// Queues are the queue URLs a redrive reads from and writes to. A kind
// whose queue is empty stays in the dead-letter queue.
type Queues struct {
	DLQ, Changes, Deferred string
}

// Target is the queue a message of kind k goes back to ("" if none).
func (q Queues) Target(k Kind) string {
	switch k {
	case Change:
		return q.Changes
	case Job:
		return q.Deferred
	}
	return ""
}

// Reader reads a dead-letter queue in batches.
type Reader struct {
	SQS SQSAPI
	URL string
	// Hide is how long a read message stays hidden while the command works
	// on it; it is made visible again unless it is moved. Default 60s.
	Hide time.Duration
	// Wait is the long-poll wait of each receive; an empty receive ends the
	// scan. Default 1s.
	Wait time.Duration
}

// read receives up to n messages (n ≤ 10).
func (r Reader) read(ctx context.Context, n int) ([]Message, error) {
	hide, wait := r.Hide, r.Wait
	if hide <= 0 {
		hide = time.Minute
	}
	if wait <= 0 {
		wait = time.Second
	}
	out, err := r.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &r.URL,
		MaxNumberOfMessages:         int32(min(n, 10)),
		VisibilityTimeout:           int32(hide.Seconds()),
		WaitTimeSeconds:             int32(wait.Seconds()),
		MessageAttributeNames:       []string{queue.ReasonAttribute},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp, types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return nil, queueError("read the dead-letter queue", r.URL, err)
	}
	msgs := make([]Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		msgs = append(msgs, message(m))
	}
	return msgs, nil
}

func message(m types.Message) Message {
	out := Message{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), receipt: aws.ToString(m.ReceiptHandle)}
	out.Kind = Classify(out.Body)
	if v, ok := m.MessageAttributes[queue.ReasonAttribute]; ok {
		out.Reason = aws.ToString(v.StringValue)
	}
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		out.Sent = time.UnixMilli(ms).UTC()
	}
	out.Receives, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	return out
}

// release makes kept messages visible again. It runs even when ctx has
// ended (an operator's Ctrl-C), so nothing stays hidden for long.
func (r Reader) release(ctx context.Context, kept []Message) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var errs []error
	for _, m := range kept {
		_, err := r.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: &r.URL, ReceiptHandle: &m.receipt, VisibilityTimeout: 0,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("message %s stays hidden until its visibility timeout ends: %w", m.ID, err))
		}
	}
	return errors.Join(errs...)
}

// List returns up to max messages (0: all) without removing any.
func (r Reader) List(ctx context.Context, max int) ([]Message, error) {
	var all []Message
	err := r.scan(ctx, max, func(m Message) (bool, error) {
		all = append(all, m)
		return false, nil
	})
	return all, err
}

// scan reads until the queue answers empty or max messages were seen,
// handing each message to f, which reports whether it consumed it (moved
// it elsewhere). Every message not consumed is made visible again.
func (r Reader) scan(ctx context.Context, max int, f func(Message) (consumed bool, err error)) (err error) {
	var kept []Message
	defer func() { err = errors.Join(err, r.release(ctx, kept)) }()
	seen := 0
	for max <= 0 || seen < max {
		n := 10
		if max > 0 {
			n = min(n, max-seen)
		}
		msgs, err := r.read(ctx, n)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil
		}
		for i, m := range msgs {
			seen++
			consumed, err := f(m)
			if !consumed {
				kept = append(kept, m)
			}
			if err != nil {
				kept = append(kept, msgs[i+1:]...)
				return err
			}
		}
	}
	return nil
}

// Move is what a redrive did, or would do, with one message.
type Move struct {
	Message
	// To is the queue URL the message went (or would go) back to; empty
	// when it stays.
	To string `json:"to,omitempty"`
	// Moved is true once the message is on To and gone from the DLQ.
	Moved bool `json:"moved"`
	// Note says why a message stays.
	Note string `json:"note,omitempty"`
}

// Redrive options.
type Redrive struct {
	Reader
	Queues Queues
	// Max bounds the messages read (0: all).
	Max int
	// DryRun reads and classifies but moves nothing.
	DryRun bool
	// Log is told about every message as it is handled.
	Log func(Move)
}

// Run moves each message of a known kind back to its queue: it sends a
// copy there (without the reason attribute, so a later dead-lettering
// carries its own; a push job with its lifetime started over, see
// job.Restarted), then deletes it from the dead-letter queue. A message
// whose delete fails after its send is on both queues; the handlers are
// idempotent, so it is harmless.
func (r Redrive) Run(ctx context.Context) ([]Move, error) {
	var moves []Move
	err := r.scan(ctx, r.Max, func(m Message) (bool, error) {
		mv, err := r.move(ctx, m)
		moves = append(moves, mv)
		if r.Log != nil {
			r.Log(mv)
		}
		return mv.Moved, err
	})
	return moves, err
}

func (r Redrive) move(ctx context.Context, m Message) (Move, error) {
	mv := Move{Message: m, To: r.Queues.Target(m.Kind)}
	switch {
	case m.Kind == Unknown:
		mv.Note = "neither a PMS change event nor a push job: no queue to go back to"
		return mv, nil
	case mv.To == "" && m.Kind == Change:
		mv.Note = "no changes queue URL given (--changes-queue-url or FLEETBUCKET_CHANGES_QUEUE_URL)"
		return mv, nil
	case mv.To == "":
		mv.Note = "no deferred queue URL given (--deferred-queue-url or FLEETBUCKET_DEFERRED_QUEUE_URL)"
		return mv, nil
	case r.DryRun:
		mv.Note = "dry run"
		return mv, nil
	}
	body := m.Body
	if m.Kind == Job {
		body = restarted(body, time.Now())
	}
	if _, err := r.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &mv.To, MessageBody: &body}); err != nil {
		return mv, queueError("send message "+m.ID+" back", mv.To, err)
	}
	if _, err := r.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &r.URL, ReceiptHandle: &m.receipt}); err != nil {
		mv.Moved = true // it is on its queue; the copy left behind is a duplicate
		return mv, queueError("delete message "+m.ID+" (already sent back, so it is now on both queues)", r.URL, err)
	}
	mv.Moved = true
	return mv, nil
}

// restarted is a push job's body with its lifetime started over
// (job.Restarted): a job dead-lettered for its age or deferrals would
// otherwise expire again as soon as it is back. A body this version cannot
// read goes back as it is, for the handler to judge.
func restarted(body string, now time.Time) string {
	j, err := job.Decode(body)
	if err != nil {
		return body
	}
	out, err := job.Encode(j.Restarted(now))
	if err != nil {
		return body
	}
	return out
}

// queueError names the queue and what to check when it does not exist.
func queueError(what, url string, err error) error {
	var missing *types.QueueDoesNotExist
	if errors.As(err, &missing) {
		return fmt.Errorf("%s: queue %s does not exist: check the queue URL flags or FLEETBUCKET_*_QUEUE_URL / FLEETBUCKET_DLQ_URL (the stack's outputs)", what, url)
	}
	return fmt.Errorf("%s (%s): %w", what, url, err)
}
