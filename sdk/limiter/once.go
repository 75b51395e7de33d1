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
// caller never loses its turn to its own retry. So does First's own retry:
// a write that the store did not answer (an attempt timeout on a slow
// store) may have landed, and a caller that took the error as the answer
// would defer its job and, coming back, find the fence taken by the lost
// write and push nothing, ever. First sends the same write again, up to
// WithMaxAttempts writes, until the store answers. Like every store call it
// passes the limiter's circuit breaker: while it is open, First answers
// false with an ErrUnavailable error (fail closed: the job waits rather
// than risk a second push).
func (l *Limiter) First(ctx context.Context, key string, until time.Time) (bool, error) {
	me := newCallTag().id
	for wrote := 1; ; wrote++ {
		err := l.gateway(ctx, "UpdateItem", func(ctx context.Context) error {
			_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                &l.table,
				Key:                      map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: onceKey(key)}},
				UpdateExpression:         aws.String("SET #ttl = :ttl, #who = :me"),
				ConditionExpression:      aws.String("attribute_not_exists(#ttl) OR #who = :me"),
				ExpressionAttributeNames: map[string]string{"#ttl": TTLAttribute, "#who": "who"},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":ttl": num(ttlSeconds(until.UnixMicro())),
					":me":  str(me),
				},
			})
			return err
		})
		if _, failed := conditionFailed(err); failed {
			return false, nil
		}
		if err == nil {
			return true, nil
		}
		if _, _, stop := l.storeRetry(ctx, err, wrote, l.attempts); stop != nil || wrote >= l.attempts {
			return false, err
		}
	}
}
