// Package queue turns "no token yet" into a delayed SQS message, and
// "never" into a dead-letter message with its reason.
//
// A deferred job is sent back with DelaySeconds equal to the computed wait
// and, when it holds one, its reserved slot: SQS hands it back when its
// token is already its own, so it pushes with no second acquire. Waits past
// SQS's 15-minute ceiling chain: the job carries its due time and is
// deferred again for the remainder.
//
// No jitter is added. Jitter exists to spread retries that would otherwise
// collide, but deferred jobs do not collide: each one owns a distinct slot,
// one emission interval from the next, so their redeliveries are already
// spread exactly as the bucket allows. Jitter could only move a job away
// from its slot: earlier means waiting again, later means wasting the slot.
package queue

import (
	"context"
	"fmt"
	"math"
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
	Now         func() time.Time // default time.Now
}

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
// MaxDelay is recorded in j.NotBefore and served in 15-minute legs.
func (q *Queue) Defer(ctx context.Context, j job.Job, wait time.Duration) error {
	j.Deferrals++
	now := q.now()
	j.NotBefore = time.Time{}
	if wait > MaxDelay {
		j.NotBefore = now.Add(wait)
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
// sees why without reading logs.
func (q *Queue) DeadLetter(ctx context.Context, body, reason string) error {
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
