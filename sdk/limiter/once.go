package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/breaker"
)

// onceKey keeps fences apart from buckets: a bucket key may contain the
// shard separator only before a shard number, so no bucket is named this.
func onceKey(key string) string { return "once" + ShardSeparator + key }

// First reports whether this is the first call for key before until (when
// the item expires): one conditional write, which the fleet's other
// callers for the same key fail. Callers use it to spend a deferred job's
// slot once when the queue delivers the job twice: each copy asks, and
// only the first pushes. It is FirstAfter for a caller that has not asked
// before.
func (l *Limiter) First(ctx context.Context, key string, until time.Time) (bool, error) {
	first, _, err := l.FirstAfter(ctx, key, nil, until)
	return first, err
}

// FirstAfter is First for a caller that may have asked before without an
// answer: earlier are the tags of its earlier writes for key that the
// store did not answer (the tag FirstAfter returned with its error), any
// of which may have landed. A fence held by one of them is the caller's
// own, and FirstAfter takes it over under a new tag.
//
// Every call writes under a tag of its own, so that of two copies of one
// message that carry the same earlier tags only the first takes the fence
// over: the second finds the first's new tag. The write's retries carry
// the same tag: the SDK's retry of a write whose answer was lost finds its
// own tag and still reports true, and so does FirstAfter's own retry of a
// write the store did not answer (an attempt timeout on a slow store), up
// to WithMaxAttempts writes.
//
// When no write was answered, FirstAfter returns false, the error and the
// tag it wrote with ("" if it sent nothing: the limiter's circuit breaker
// was open). A caller that defers its job on that error (fail closed: it
// waits rather than risk a second push) keeps the tag with the job and
// passes it in earlier when the job comes back: a write that landed
// without an answer would otherwise hold the fence against its own caller,
// and the job would push nothing, ever.
func (l *Limiter) FirstAfter(ctx context.Context, key string, earlier []string, until time.Time) (first bool, tag string, err error) {
	me := newCallTag().id
	in := fenceInput(l.table, key, me, earlier, until)
	sent := false
	for wrote := 1; ; wrote++ {
		err := l.gateway(ctx, "UpdateItem", func(ctx context.Context) error {
			_, err := l.db.UpdateItem(ctx, in)
			return err
		})
		if _, failed := conditionFailed(err); failed {
			return false, me, nil
		}
		if err == nil {
			return true, me, nil
		}
		if !errors.Is(err, breaker.ErrOpen) {
			sent = true
		}
		if _, _, stop := l.storeRetry(ctx, err, wrote, l.attempts); stop != nil || wrote >= l.attempts {
			if !sent {
				me = ""
			}
			return false, me, err
		}
	}
}

// fenceInput is the fence write of tag me, which also takes over a fence
// one of the earlier tags holds.
func fenceInput(table, key, me string, earlier []string, until time.Time) *dynamodb.UpdateItemInput {
	cond := "attribute_not_exists(#ttl) OR #who = :me"
	values := map[string]types.AttributeValue{
		":ttl": num(ttlSeconds(until.UnixMicro())),
		":me":  str(me),
	}
	for i, t := range earlier {
		v := fmt.Sprintf(":e%d", i)
		cond += " OR #who = " + v
		values[v] = str(t)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 &table,
		Key:                       map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: onceKey(key)}},
		UpdateExpression:          aws.String("SET #ttl = :ttl, #who = :me"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#ttl": TTLAttribute, "#who": "who"},
		ExpressionAttributeValues: values,
	}
}
