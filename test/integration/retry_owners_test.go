package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// claimedRef is the hotel ref of the lane a claim names.
func claimedRef(in *dynamodb.UpdateItemInput) string {
	for _, name := range in.ExpressionAttributeNames {
		if strings.HasPrefix(name, "o:") {
			return name[strings.LastIndex(name, "#")+1:]
		}
	}
	return ""
}

// failingReads fails the ARI store's reads: a push's render.
type failingReads struct{ ari.DynamoDBAPI }

func (failingReads) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return nil, &types.InternalServerError{Message: aws.String("injected: DynamoDB unreachable")}
}

// receiveOne long-polls url for one message and returns it as the sync
// function reads it (functions/sync: Attempt, Owners).
func receiveOne(t *testing.T, r *laneRig, url string, deferred bool) syncer.Message {
	t.Helper()
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); {
		out, err := r.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 1,
			WaitTimeSeconds: 20, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			continue
		}
		m := out.Messages[0]
		if _, err := r.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		attempt := syncer.AttemptOf(aws.ToString(m.MessageAttributes[syncer.RetryAttribute].StringValue))
		return syncer.Message{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Deferred: deferred, Redelivered: attempt > 0, Attempt: attempt,
			Owners: syncer.OwnersOf(aws.ToString(m.MessageAttributes[syncer.RetryOwnersAttribute].StringValue))}
	}
	t.Fatalf("no message arrived on %s", url)
	return syncer.Message{}
}

// retryRig is a two-lane rig that pushes at once, and a change to them.
func retryRig(t *testing.T) (*laneRig, *pms, string) {
	t.Helper()
	lim := limiter.PerSecond(20, 10)
	r := newLaneRig(t, lim, mockota.Config{Limit: limiter.PerSecond(100, 50)}, connconfig.Credentials(lim, 2))
	r.linger = -1
	src := newPMS("hotel-aurora")
	return r, src, src.change("rates", "DBL", "2027-01-05", "2027-01-07", 1)
}
