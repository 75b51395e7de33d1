package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// MaxDelay is the longest DelaySeconds SQS accepts.
const MaxDelay = 900 * time.Second

// ReasonAttribute is the message attribute that says why a message was
// dead-lettered.
const ReasonAttribute = "fleetbucket-reason"

// SQSAPI is the part of *sqs.Client this package uses.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Queue sends jobs to the deferred queue and to the dead-letter queue.
type Queue struct {
	SQS         SQSAPI
	DeferredURL string
	DeadURL     string
	// MaxMessageBytes is the most the dead-letter queue holds in one
	// message (its MaximumMessageSize); DefaultMaxMessageBytes if zero.
	// A dead letter that would not fit is sent as a reference (Reference).
	MaxMessageBytes int
	Now             func() time.Time // default time.Now
}

// DefaultMaxMessageBytes is Queue.MaxMessageBytes if unset: 256 KiB, what
// an SQS queue holds unless it was created or raised to hold more (at
// most 1 MiB).
const DefaultMaxMessageBytes = 256 << 10

func (q *Queue) now() time.Time {
	if q.Now != nil {
		return q.Now()
	}
	return time.Now()
}

// Delay is the DelaySeconds for a wait: rounded up, so a job never comes
// back before its slot, and capped at SQS's maximum.
func Delay(wait time.Duration) int32 {
	if wait <= 0 {
		return 0
	}
	return int32(min(math.Ceil(wait.Seconds()), MaxDelay.Seconds()))
}

// Defer sends j to the deferred queue to come back after wait. A wait past
// MaxDelay is recorded in j.NotBefore and served in 15-minute legs. With no
// wait, j comes back at once and keeps its NotBefore: a caller's way to
// have a wait shorter than SQS's one-second step slept where j lands.
func (q *Queue) Defer(ctx context.Context, j job.Job, wait time.Duration) error {
	j.Deferrals++
	now := q.now()
	switch {
	case wait > MaxDelay:
		j.NotBefore = now.Add(wait)
	case wait > 0:
		j.NotBefore = time.Time{}
	}
	j.DeferredAt, j.Due = now, now.Add(time.Duration(Delay(wait))*time.Second)
	body, err := job.Encode(j)
	if err != nil {
		return err
	}
	_, err = q.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     &q.DeferredURL,
		MessageBody:  &body,
		DelaySeconds: Delay(wait),
	})
	if err != nil {
		return fmt.Errorf("defer job %q by %v: %w", j.ID, wait, err)
	}
	return nil
}

// DeadLetter sends a message body that will never be processed to the
// dead-letter queue, with the reason as a message attribute so an operator
// sees why without reading logs. A body the queue cannot hold (a refused
// push of several hundred KB) goes as its Reference instead: a message
// the queue refuses would leave the job on its source queue, to push and
// be refused again at every delivery.
func (q *Queue) DeadLetter(ctx context.Context, body, reason string) error {
	if limit := q.maxMessageBytes(); messageBytes(body, reason) > limit {
		body, reason = Reference(body, reason, limit)
	}
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	_, err := q.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    &q.DeadURL,
		MessageBody: &body,
		MessageAttributes: map[string]types.MessageAttributeValue{
			ReasonAttribute: {DataType: aws.String("String"), StringValue: &reason},
		},
	})
	if err != nil {
		return fmt.Errorf("dead-letter message (%s): %w", reason, err)
	}
	return nil
}

func (q *Queue) maxMessageBytes() int {
	if q.MaxMessageBytes > 0 {
		return q.MaxMessageBytes
	}
	return DefaultMaxMessageBytes
}

// messageBytes is what SQS counts of a dead letter against its limit: the
// body and the reason attribute's name, type and value.
func messageBytes(body, reason string) int {
	return len(body) + len(ReasonAttribute) + len("String") + min(len(reason), 1024)
}

// referenceKey names a Reference's marker field.
const referenceKey = "fleetbucket_dead_letter"

// Reference is what DeadLetter sends for a body over limit bytes: a JSON
// object that says so and carries the body's size, SHA-256 and as much of
// its start as fits, with the reason prefixed by the same. No queue takes
// it back (cmd/fleetbucket/dlq classifies it unknown), and the rest of the body
// is in the logs' reason only as its digest: the state it rendered is
// still in the ARI state table.
func Reference(body, reason string, limit int) (string, string) {
	sum := sha256.Sum256([]byte(body))
	digest := hex.EncodeToString(sum[:])
	for keep := min(len(body), limit); ; keep /= 2 {
		head := strings.ToValidUTF8(body[:keep], "")
		ref, _ := json.Marshal(map[string]any{
			referenceKey: "body too large for the dead-letter queue; head is its start",
			"bytes":      len(body), "sha256": digest, "head": head,
		})
		why := fmt.Sprintf("body of %d bytes over the dead-letter queue's %d: sent its first %d bytes (sha256 %s); %s", len(body), limit, len(head), digest, reason)
		if messageBytes(string(ref), why) <= limit || keep == 0 {
			return string(ref), why
		}
	}
}
