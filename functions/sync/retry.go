package main

import (
	"context"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// retrySQS is what sending a failed change again needs: the queue's URL
// (an event names its queue by ARN) and the send.
type retrySQS interface {
	syncer.RetryAPI
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// changeQueues sends a batch's failed changes again (syncer.Retry) to the
// queue they came from, whose URL it looks up once per ARN.
type changeQueues struct {
	sqs  retrySQS
	mu   sync.Mutex
	urls map[string]string
}

func newChangeQueues(c retrySQS) *changeQueues {
	return &changeQueues{sqs: c, urls: map[string]string{}}
}

// url is the queue URL of an SQS ARN (arn:aws:sqs:region:account:name).
func (q *changeQueues) url(ctx context.Context, arn string) (string, error) {
	q.mu.Lock()
	u, ok := q.urls[arn]
	q.mu.Unlock()
	if ok {
		return u, nil
	}
	parts := strings.Split(arn, ":")
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(parts[len(parts)-1])}
	if len(parts) == 6 {
		in.QueueOwnerAWSAccountId = aws.String(parts[4])
	}
	out, err := q.sqs.GetQueueUrl(ctx, in)
	if err != nil {
		return "", err
	}
	q.mu.Lock()
	q.urls[arn] = aws.ToString(out.QueueUrl)
	q.mu.Unlock()
	return aws.ToString(out.QueueUrl), nil
}

// retry sends the batch's failed changes again and returns the IDs it
// sent: their originals are done. A batch comes from one queue.
func (h *handler) retry(ctx context.Context, ev events.SQSEvent, msgs []syncer.Message, outs []syncer.MessageResult) map[string]bool {
	if h.queues == nil || len(ev.Records) == 0 {
		return nil
	}
	failed := false
	for i, out := range outs {
		failed = failed || (out.Err != nil && !msgs[i].Deferred)
	}
	if !failed {
		return nil
	}
	url, err := h.queues.url(ctx, ev.Records[0].EventSourceARN)
	if err != nil {
		h.log.Warn("failed changes left to their visibility timeout: the queue's URL is unknown", "err", err)
		return nil
	}
	return syncer.Retry(ctx, h.queues.sqs, url, msgs, outs)
}
