package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/test/poller"
)

// lostAnswerVisibility is how long a received message stays hidden until
// its receive's answer has reached the poller (shortReceiver).
const lostAnswerVisibility = 10 * time.Second

// shortReceiver receives with a short visibility timeout and extends it to
// the poller's for the messages whose answer arrived. Against the emulator,
// a ReceiveMessage answer sometimes fails mid-body on the client (200, then
// "use of closed network connection") and the SDK sends the receive again:
// the messages of the lost answer were received all the same, and came
// back only after the pollers' 60 s visibility timeout, each a change a
// minute late. Now they come back after lostAnswerVisibility. A failed
// extension leaves its messages to come back after that too, as a
// duplicate delivery, which the pipeline handles like any other.
type shortReceiver struct {
	queueClient
	onError func(error)
}

// queueClient is the part of *sqs.Client a demo poller uses.
type queueClient interface {
	poller.SQSAPI
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// pollerClient is what a demo poller of queue receives with: a
// shortReceiver on c, traced with -trace.
func pollerClient(c queueClient, t *tracer, queue string, onError func(error)) poller.SQSAPI {
	var short poller.SQSAPI = shortReceiver{queueClient: c, onError: onError}
	if t == nil {
		return short
	}
	return tracedReceiver{SQSAPI: short, t: t, queue: queue}
}

func (r shortReceiver) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	short := *in
	want := in.VisibilityTimeout
	short.VisibilityTimeout = min(want, int32(lostAnswerVisibility/time.Second))
	out, err := r.queueClient.ReceiveMessage(ctx, &short, o...)
	if err != nil || len(out.Messages) == 0 || want <= short.VisibilityTimeout {
		return out, err
	}
	entries := make([]sqstypes.ChangeMessageVisibilityBatchRequestEntry, len(out.Messages))
	for i, m := range out.Messages {
		entries[i] = sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: want}
	}
	for start := 0; start < len(entries); start += 10 {
		batch := entries[start:min(start+10, len(entries))]
		res, err := r.queueClient.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: in.QueueUrl, Entries: batch})
		switch {
		case err != nil:
			r.report(fmt.Errorf("extend the visibility of %d received messages to %d s: %w", len(batch), want, err))
		case len(res.Failed) > 0:
			r.report(fmt.Errorf("extend the visibility of received messages: %d of %d failed: %s", len(res.Failed), len(batch), aws.ToString(res.Failed[0].Message)))
		}
	}
	return out, nil
}

func (r shortReceiver) report(err error) {
	if r.onError != nil {
		r.onError(err)
	}
}
