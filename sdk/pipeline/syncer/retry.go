package syncer

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// A change message that fails is never a poison message (those are
// dead-lettered with their reason): its state or lane write, or a push's
// booking, met a store or queue that did not answer. Left on its queue, it
// would come back only after the visibility timeout (6 × the function
// timeout), so a DynamoDB outage would leave every change of its last
// minutes six minutes late after it ended. Shortening the visibility
// (ChangeMessageVisibility) would spend the message's receives instead:
// at a 10 s backoff, maxReceiveCount (5) would redrive every change of a
// 10-minute outage to the dead-letter queue. So Retry sends the change
// again as a new message, delayed by a backoff that starts at the
// limiter's breaker cooldown and doubles up to RetryMax, and the original
// is deleted like a handled one. The attempt rides in RetryAttribute;
// after MaxRetries the change is left on its queue as before, so a change
// that can never succeed still ends in the dead-letter queue. A change is
// idempotent (sequence-guarded state, lane marks fenced by their owner
// tokens), so a copy sent twice is harmless.
//
// A change that failed after its mark left its lanes owned by tokens of
// its delivery's own for a lease (lane.DefaultLease). Its copy would find
// them owned by another and wait out that lease and a recheck, minutes
// after the store is back. So Retry carries in RetryOwnersAttribute what
// tells those lanes (owners.go), and the copy's mark takes a lane they
// hold as its own: its push claims (lane.Store.Claim), never the
// claim-free first push, since a job of the failed delivery may be
// deferred under the same token, and the claim lets exactly one of them
// push. A plain redelivery (visibility timeout) carries nothing and
// recovers by the lease, as before.

// RetryAttribute is the message attribute of a change sent again by Retry:
// how many times it has failed.
const RetryAttribute = "fleetbucket-retry"

// RetryOwnersAttribute is the message attribute of a change sent again by
// Retry: what tells the lanes its failed deliveries held (the nonces of
// their marks, the tokens their claims made owners: owners.go), comma
// separated (OwnersOf).
const RetryOwnersAttribute = "fleetbucket-retry-owners"

// maxRetryOwners bounds what one retried change carries (27 bytes at
// most each): ten retried changes then stay far within SendMessageBatch's
// 256 KB. The lanes of a change held under more are recovered by their
// lease, as a plain redelivery's are.
const maxRetryOwners = 100

const (
	// RetryBase is the first retry's delay: the limiter's breaker cooldown
	// (functions/sync), after which a store that was out is tried again.
	RetryBase = 10 * time.Second
	// RetryMax bounds the backoff, and with it how late the changes of an
	// outage are pushed after it ends.
	RetryMax = time.Minute
	// MaxRetries is how often a change is sent again (about half an hour
	// of backoff) before it is left to its queue's redrive.
	MaxRetries = 30
)

// RetryDelay is the delay before attempt n (1 for a change's first
// failure).
func RetryDelay(n int) time.Duration {
	d := RetryBase
	for i := 1; i < n && d < RetryMax; i++ {
		d *= 2
	}
	return min(d, RetryMax)
}

// RetryAPI is the SQS call Retry makes.
type RetryAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Retry sends the failed change messages of a batch (out[i].Err set, not
// Deferred, fewer than MaxRetries attempts) again to queueURL, each
// delayed by RetryDelay of its attempt, and returns the IDs of those sent:
// their originals are done and must be deleted (not reported as batch item
// failures). A message Retry could not send stays failed.
func Retry(ctx context.Context, q RetryAPI, queueURL string, msgs []Message, out []MessageResult) map[string]bool {
	var entries []sqstypes.SendMessageBatchRequestEntry
	ids := map[string]string{} // entry id → message id
	for i, m := range msgs {
		if i >= len(out) || out[i].Err == nil || m.Deferred || m.Attempt >= MaxRetries {
			continue
		}
		n := m.Attempt + 1
		id := strconv.Itoa(i)
		ids[id] = m.ID
		attrs := map[string]sqstypes.MessageAttributeValue{
			RetryAttribute: {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(n))},
		}
		if owners := out[i].Owners; len(owners) > 0 {
			owners = owners[:min(len(owners), maxRetryOwners)]
			attrs[RetryOwnersAttribute] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(strings.Join(owners, ","))}
		}
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{
			Id: aws.String(id), MessageBody: aws.String(m.Body),
			DelaySeconds:      int32((RetryDelay(n) + time.Second - 1) / time.Second),
			MessageAttributes: attrs,
		})
	}
	sent := map[string]bool{}
	for len(entries) > 0 {
		chunk := entries[:min(10, len(entries))]
		entries = entries[len(chunk):]
		res, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: chunk})
		if err != nil {
			continue
		}
		for _, ok := range res.Successful {
			sent[ids[aws.ToString(ok.Id)]] = true
		}
	}
	return sent
}

// AttemptOf reads RetryAttribute's value (0 if absent).
func AttemptOf(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// ownerToken is what a failed delivery held (owners.go): the nonce of its
// marks, or a token a claim made owner (newToken).
var ownerToken = regexp.MustCompile(`^(n-[0-9a-f]{16}|t-[0-9a-f]{24})$`)

// OwnersOf reads RetryOwnersAttribute's value: nil if absent or malformed
// (a token of another shape, or more than Retry sends), which leaves the
// change to recover its lanes by their lease, like a plain redelivery.
func OwnersOf(v string) []string {
	if v == "" {
		return nil
	}
	owners := strings.Split(v, ",")
	if len(owners) > maxRetryOwners {
		return nil
	}
	for _, o := range owners {
		if !ownerToken.MatchString(o) {
			return nil
		}
	}
	return owners
}
