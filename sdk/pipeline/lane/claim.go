package lane

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// NotOwnerError is a claim refused because the lane has another owner (or
// none): the job was a duplicate, or its lease ran out and another took
// over. Pending says who holds the lane now.
type NotOwnerError struct {
	Lane    ID
	Pending Pending
}

func (e *NotOwnerError) Error() string {
	if e.Pending.Owner == "" {
		return fmt.Sprintf("lane %s has no owner", e.Lane)
	}
	return fmt.Sprintf("lane %s is owned by %s until %s", e.Lane, e.Pending.Owner, e.Pending.LeaseUntil.Format(time.RFC3339Nano))
}

// Claim makes next the owner of the lane if token owns it (or its owner's
// lease has run out), removes done (what token's previous push carried)
// and returns what is pending, in one write. Anything else fails with a
// *NotOwnerError.
func (s *Store) Claim(ctx context.Context, id ID, token, next string, done []Element) (Pending, error) {
	return s.ClaimAfter(ctx, id, token, nil, next, done)
}

// MaxUnanswered bounds the earlier tokens ClaimAfter takes.
const MaxUnanswered = 8

// ClaimAfter is Claim for a job whose earlier claims failed without an
// answer: earlier are the tokens they offered as next, and a claim that
// landed with its answer lost left the lane to one of them, which no other
// job holds. So the lane is the job's if token or any of earlier owns it.
// A copy of the job carries the same earlier tokens, but the first claim
// moves the lane to a fresh next, so only one copy claims. At most
// MaxUnanswered of earlier, the newest, are read.
func (s *Store) ClaimAfter(ctx context.Context, id ID, token string, earlier []string, next string, done []Element) (Pending, error) {
	now := s.now()
	names := map[string]string{}
	o, l := attr(names, "o", id, 0), attr(names, "l", id, 0)
	update := fmt.Sprintf("SET %s = :next, %s = :l", o, l)
	vals := map[string]types.AttributeValue{":next": str(next), ":t": str(token), ":l": micros(now.Add(s.lease())), ":now": micros(now)}
	cond := o + " = :t"
	for i, e := range earlier[max(0, len(earlier)-MaxUnanswered):] {
		vals[fmt.Sprintf(":e%d", i)] = str(e)
		cond += fmt.Sprintf(" OR %s = :e%d", o, i)
	}
	cond += fmt.Sprintf(" OR %s < :now", l)
	// A claim takes the lane up: it is no longer stranded. It reads what
	// is pending now, so a compaction before it (x) is part of what its
	// push carries. done is what the previous push delivered, so the lane
	// is no longer failing.
	remove := " REMOVE " + attr(names, "w", id, 0) + ", " + attr(names, "x", id, 0)
	if len(done) > 0 {
		update += " DELETE " + attr(names, "d", id, 0) + " :done"
		vals[":done"] = elementSet(done)
		remove += ", " + attr(names, "f", id, 0)
	}
	update += remove
	out, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.Table,
		Key:                                 key(id),
		UpdateExpression:                    &update,
		ConditionExpression:                 &cond,
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if item, failed := conditionFailed(err); failed {
		_, err := refused(item, id, "")
		return Pending{}, err
	}
	if err != nil {
		return Pending{}, fmt.Errorf("claim lane %s: %w", id, err)
	}
	return pendingOf(out.Attributes, id)
}
