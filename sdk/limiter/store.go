package limiter

import (
	"context"
	"errors"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The item layout. One item per bucket: {pk: key, tat: µs, ttl: epoch s}.
// The names are exported so the CDK stack and operators use the same ones.
const (
	// KeyAttribute is the table's partition key (type S).
	KeyAttribute = "pk"
	// TATAttribute holds the theoretical arrival time in Unix microseconds.
	TATAttribute = "tat"
	// TTLAttribute holds the item's expiry in Unix seconds; enable TTL on it.
	TTLAttribute = "ttl"
)

// DynamoDBAPI is the part of *dynamodb.Client the limiter uses, so callers
// can wrap it (metrics, fault injection) or substitute another client.
type DynamoDBAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// form is one of the two guarded writes that together implement
// tat := max(tat, now) + n·T without a read, since an update expression has
// no max().
type form int

const (
	// idle: the bucket is full (tat ≤ now or no item), so max() is now.
	idle form = iota
	// busy: tat > now, so max() is tat, and the write only adds n·T to it.
	// Concurrent busy writes commute: workers never invalidate each other,
	// so a saturated bucket costs one write per grant.
	busy
)

// names are shared by every expression; "ttl" is a DynamoDB reserved word.
var names = map[string]string{"#tat": TATAttribute, "#ttl": TTLAttribute}

// noSDKRetry stops the SDK from resending a conditional write with the same
// :now. A write applied δ late grants δ·rate tokens early; the limiter
// retries itself, with a fresh clock reading.
func noSDKRetry(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// takeInput builds the write for f. limitTAT is the highest tat the busy form
// may find and still grant: now + τ − n·T + maxDelay.
func (l *Limiter) takeInput(key string, f form, now, nT, limitTAT, ttl int64) *dynamodb.UpdateItemInput {
	in := &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: key}},
		ExpressionAttributeNames:            names,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if f == idle {
		in.UpdateExpression = aws.String("SET #tat = :next, #ttl = :ttl")
		in.ConditionExpression = aws.String("attribute_not_exists(#tat) OR #tat <= :now")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":next": num(now + nT), ":now": num(now), ":ttl": num(ttl),
		}
		return in
	}
	in.UpdateExpression = aws.String("SET #tat = #tat + :nT, #ttl = :ttl")
	in.ConditionExpression = aws.String("#tat > :now AND #tat <= :limit")
	in.ExpressionAttributeValues = map[string]types.AttributeValue{
		":nT": num(nT), ":now": num(now), ":limit": num(limitTAT), ":ttl": num(ttl),
	}
	return in
}

// penalizeInput raises tat to at least penalty, never lowers it.
func (l *Limiter) penalizeInput(key string, penalty, ttl int64) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: key}},
		ExpressionAttributeNames:            names,
		UpdateExpression:                    aws.String("SET #tat = :p, #ttl = :ttl"),
		ConditionExpression:                 aws.String("attribute_not_exists(#tat) OR #tat < :p"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":p": num(penalty), ":ttl": num(ttl)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// itemTAT reads tat from an item; a missing item or attribute is a full
// bucket, tat 0.
func itemTAT(item map[string]types.AttributeValue) (int64, error) {
	v, ok := item[TATAttribute]
	if !ok {
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, errors.New("attribute tat is not a number")
	}
	return strconv.ParseInt(n.Value, 10, 64)
}

// conditionFailed returns the item a failed condition handed back (nil for
// no item) and whether err was a failed condition at all.
func conditionFailed(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

// ttlSeconds is the expiry for an item whose tat can be at most maxTAT µs:
// the bucket is full from then on, so deleting the item loses nothing. It is
// computed from the write's own bound, never from a cached tat, so it is
// always ≥ the tat that write leaves.
func ttlSeconds(maxTAT int64) int64 { return (maxTAT + 999_999) / 1_000_000 }

// transactItem is the write for f as one item of a TransactWriteItems
// (TakeMulti, ReserveMulti): the same guarded update as takeInput, handing
// back the item in its cancellation reason when its condition fails.
func (l *Limiter) transactItem(key string, f form, now, nT, limitTAT, ttl int64) types.TransactWriteItem {
	in := l.takeInput(key, f, now, nT, limitTAT, ttl)
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                           in.TableName,
		Key:                                 in.Key,
		UpdateExpression:                    in.UpdateExpression,
		ConditionExpression:                 in.ConditionExpression,
		ExpressionAttributeNames:            in.ExpressionAttributeNames,
		ExpressionAttributeValues:           in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}
