package limiter

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The item layout. One item per bucket: {pk: key, tat: µs, bk: µs, ttl:
// epoch s, su: µs (the end of the last silence a vendor asked, see
// Silence), and up to callLanes pairs c<i>: the tag of the last grant
// written through lane i, t<i>: the tat that grant left}.
// The names are exported so the CDK stack and operators use the same ones.
const (
	// KeyAttribute is the table's partition key (type S).
	KeyAttribute = "pk"
	// TATAttribute holds the theoretical arrival time in Unix microseconds.
	TATAttribute = "tat"
	// TTLAttribute holds the item's expiry in Unix seconds; enable TTL on it.
	TTLAttribute = "ttl"
	// bookedAttribute holds the booked horizon in Unix microseconds: the
	// tat the last grant left. Slots handed out lie before it (each at
	// most burst·T before the tat its grant left); tat above it is a
	// penalty no slot is booked behind, which is all a Reset takes away.
	bookedAttribute = "bk"
)

// callLanes is the number of call-tag lanes an item carries. Each call
// writes its tag into one lane picked at random (attributes c<lane> and
// t<lane>), so a retry after a lost answer can tell whether its write landed
// even when other calls wrote the item since, unless one of them picked the
// same lane (about 1 in 16 per write in between). 16 lanes keep a bucket's
// item under 1 KB (one write unit per write).
const callLanes = 16

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

// names are shared by penalize and reset expressions; "ttl" is a DynamoDB
// reserved word.
var names = map[string]string{"#tat": TATAttribute, "#ttl": TTLAttribute}

// resetNames, penaltyNames and silenceNames are those of the reset and
// penalty expressions: DynamoDB refuses names an expression does not use.
var (
	resetNames   = map[string]string{"#tat": TATAttribute, "#bk": bookedAttribute, "#su": silenceAttribute, "#ps": probationSpacingAttribute, "#pu": probationUntilAttribute}
	penaltyNames = map[string]string{"#tat": TATAttribute, "#ttl": TTLAttribute, "#su": silenceAttribute}
	silenceNames = map[string]string{"#tat": TATAttribute, "#su": silenceAttribute}
)

// laneNames are the expression names of a grant written through lane i.
var laneNames = func() []map[string]string {
	out := make([]map[string]string, callLanes)
	for i := range out {
		out[i] = map[string]string{"#tat": TATAttribute, "#ttl": TTLAttribute, "#bk": bookedAttribute,
			"#cid": "c" + strconv.Itoa(i), "#lt": "t" + strconv.Itoa(i)}
	}
	return out
}()

// callTag names one call's writes. Every grant write SETs its lane's c to
// call + "." + index and its lane's t to the tat it leaves, and is guarded
// by NOT begins_with(c, call + "."): a write of this call that landed (and
// whose answer was lost) makes every later write of the same call fail its
// condition, as long as no worker sharing the lane has written since, and
// the failed condition's ALL_OLD then shows which of the call's writes it
// was and the tat it left.
type callTag struct {
	id   string // random, ending in "."
	lane int
}

func newCallTag() callTag {
	return callTag{id: strconv.FormatUint(rand.Uint64(), 36) + ".", lane: rand.IntN(callLanes)}
}

func (c callTag) write(i int) string { return c.id + strconv.Itoa(i) }

// landed returns the index of this call's write that item carries in the
// call's lane, if any, and the tat that write left.
func (c callTag) landed(item map[string]types.AttributeValue) (i int, tat int64, ok bool) {
	v, ok := item["c"+strconv.Itoa(c.lane)].(*types.AttributeValueMemberS)
	if !ok || !strings.HasPrefix(v.Value, c.id) {
		return 0, 0, false
	}
	i, err := strconv.Atoi(strings.TrimPrefix(v.Value, c.id))
	if err != nil {
		return 0, 0, false
	}
	t, ok := item["t"+strconv.Itoa(c.lane)].(*types.AttributeValueMemberN)
	if !ok {
		return 0, 0, false
	}
	tat, err = strconv.ParseInt(t.Value, 10, 64)
	return i, tat, err == nil
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// noSDKRetry stops the SDK from resending a conditional write with the same
// :now. A write applied δ late grants δ·rate tokens early; the limiter
// retries itself, after a jittered backoff and with a fresh clock reading.
func noSDKRetry(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// takeInput builds write number i of call for f. limitTAT is the highest
// tat the busy form may find and still grant: now + τ − n·T + maxDelay.
// Both forms move the booked horizon (bk) to the tat they leave: every
// grant's slot lies before it.
func (l *Limiter) takeInput(key string, f form, now, nT, limitTAT, ttl int64, call callTag, i int) *dynamodb.UpdateItemInput {
	in := &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: key}},
		ExpressionAttributeNames:            laneNames[call.lane],
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if f == idle {
		in.UpdateExpression = aws.String("SET #tat = :next, #bk = :next, #ttl = :ttl, #cid = :cid, #lt = :next")
		in.ConditionExpression = aws.String("(attribute_not_exists(#tat) OR #tat <= :now) AND NOT begins_with(#cid, :call)")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":next": num(now + nT), ":now": num(now), ":ttl": num(ttl), ":cid": str(call.write(i)), ":call": str(call.id),
		}
		return in
	}
	in.UpdateExpression = aws.String("SET #tat = #tat + :nT, #bk = #tat + :nT, #ttl = :ttl, #cid = :cid, #lt = #tat + :nT")
	in.ConditionExpression = aws.String("#tat > :now AND #tat <= :limit AND NOT begins_with(#cid, :call)")
	in.ExpressionAttributeValues = map[string]types.AttributeValue{
		":nT": num(nT), ":now": num(now), ":limit": num(limitTAT), ":ttl": num(ttl), ":cid": str(call.write(i)), ":call": str(call.id),
	}
	return in
}

// penalizeInput raises tat to at least penalty (withTAT) and the silence
// to at least until (withSilence), never lowering either. A write of the
// silence alone is for an item whose tat is already past the penalty: it
// needs the item (a missing one is a full bucket, which needs the tat),
// and no TTL, since the tat it keeps comes after until.
//
// With prob, the silence's write also sets the probation, and is
// conditional on the item's silence being the one it was decided after
// (which is lower than until) rather than on it being lower.
func (l *Limiter) penalizeInput(key string, penalty, until, ttl int64, withTAT, withSilence bool, prob *probationWrite) *dynamodb.UpdateItemInput {
	in := &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: key}},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	const (
		tatLower     = "(attribute_not_exists(#tat) OR #tat < :p)"
		silenceLower = "(attribute_not_exists(#su) OR #su < :u)"
	)
	switch {
	case withTAT && withSilence:
		in.ExpressionAttributeNames = penaltyNames
		in.UpdateExpression = aws.String("SET #tat = :p, #ttl = :ttl, #su = :u")
		in.ConditionExpression = aws.String(tatLower + " AND " + silenceLower)
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":p": num(penalty), ":ttl": num(ttl), ":u": num(until)}
	case withTAT:
		in.ExpressionAttributeNames = names
		in.UpdateExpression = aws.String("SET #tat = :p, #ttl = :ttl")
		in.ConditionExpression = aws.String(tatLower)
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":p": num(penalty), ":ttl": num(ttl)}
	default:
		in.ExpressionAttributeNames = silenceNames
		in.UpdateExpression = aws.String("SET #su = :u")
		in.ConditionExpression = aws.String("attribute_exists(#tat) AND " + silenceLower)
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":u": num(until)}
	}
	if prob != nil && withSilence {
		withProbation(in, silenceLower, prob)
	}
	return in
}

// withProbation makes a penalty's write of the silence set the probation
// too, conditional on the silence it was decided after instead of lower.
func withProbation(in *dynamodb.UpdateItemInput, silenceLower string, prob *probationWrite) {
	in.ExpressionAttributeNames = maps.Clone(in.ExpressionAttributeNames)
	in.ExpressionAttributeNames["#ps"], in.ExpressionAttributeNames["#pu"] = probationSpacingAttribute, probationUntilAttribute
	in.ExpressionAttributeValues[":ps"], in.ExpressionAttributeValues[":pu"] = num(prob.next.Spacing), num(prob.next.Until)
	in.UpdateExpression = aws.String(*in.UpdateExpression + ", #ps = :ps, #pu = :pu")
	same := "attribute_not_exists(#su)"
	if prob.after > 0 {
		same = "#su = :sp"
		in.ExpressionAttributeValues[":sp"] = num(prob.after)
	}
	in.ConditionExpression = aws.String(strings.Replace(*in.ConditionExpression, silenceLower, "("+same+")", 1))
}

// resetInput lowers tat to the booked horizon (see Reset): what lies above
// it is a penalty no slot is booked behind. It removes the silence too. An item with no booked horizon
// (never granted since bk was introduced) is made full (tat 0). A bucket
// already at its horizon, or with no tat (full), is left alone: the
// condition fails and ALL_OLD shows it as it is. The TTL stays: it already
// covers a tat at least as high. The lanes stay too, and a grant recognised
// from them after a reset was charged before it, so it stands.
func (l *Limiter) resetInput(key string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: key}},
		ExpressionAttributeNames:            resetNames,
		UpdateExpression:                    aws.String("SET #tat = if_not_exists(#bk, :zero) REMOVE #su, #ps, #pu"),
		ConditionExpression:                 aws.String("attribute_exists(#tat) AND (attribute_not_exists(#bk) OR #tat > #bk OR attribute_exists(#su))"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":zero": num(0)},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// itemTAT reads tat from an item; a missing item or attribute is a full
// bucket, tat 0.
func itemTAT(item map[string]types.AttributeValue) (int64, error) {
	return itemMicros(item, TATAttribute)
}

// itemBooked reads the booked horizon from an item; none is 0.
func itemBooked(item map[string]types.AttributeValue) (int64, error) {
	return itemMicros(item, bookedAttribute)
}

func itemMicros(item map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := item[name]
	if !ok {
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, errors.New("attribute " + name + " is not a number")
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
func (l *Limiter) transactItem(key string, f form, now, nT, limitTAT, ttl int64, call callTag, i int) types.TransactWriteItem {
	in := l.takeInput(key, f, now, nT, limitTAT, ttl, call, i)
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
