package limiter

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// onceKey keeps fences apart from buckets: a bucket key may contain the
// shard separator only before a shard number, so no bucket is named this.
func onceKey(key string) string { return "once" + ShardSeparator + key }

// First reports whether this is the first call for key before until (when
// the item expires): one conditional write, which the fleet's other
// callers for the same key fail. Callers use it to spend a deferred job's
// slot once when the queue delivers the job twice: each copy asks, and
// only the first pushes.
//
// The write carries the call's own tag, so the SDK's retry of a write whose
// answer was lost finds its own tag and still reports true: the first
// caller never loses its turn to its own retry.
func (l *Limiter) First(ctx context.Context, key string, until time.Time) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, l.attemptTimeout)
	defer cancel()
	_, err := l.db.UpdateItem(actx, &dynamodb.UpdateItemInput{
		TableName:                &l.table,
		Key:                      map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: onceKey(key)}},
		UpdateExpression:         aws.String("SET #ttl = :ttl, #who = :me"),
		ConditionExpression:      aws.String("attribute_not_exists(#ttl) OR #who = :me"),
		ExpressionAttributeNames: map[string]string{"#ttl": TTLAttribute, "#who": "who"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":ttl": num(ttlSeconds(until.UnixMicro())),
			":me":  str(newCallTag().id),
		},
	})
	if _, failed := conditionFailed(err); failed {
		return false, nil
	}
	if err != nil {
		return false, l.storeFailure(ctx, actx, "UpdateItem", err)
	}
	return true, nil
}
