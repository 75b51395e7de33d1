package lane

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Release gives the lane up if nothing is pending. A change that arrived
// since found the lane owned and did not schedule a push, so then the
// owner keeps the lane and Release returns what is pending.
func (s *Store) Release(ctx context.Context, id ID, owner string) (Pending, error) {
	names := map[string]string{}
	sfx := id.suffix()
	d, o, l := attr(names, "d", sfx, 0), attr(names, "o", sfx, 0), attr(names, "l", sfx, 0)
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.Table,
		Key:                                 key(id),
		UpdateExpression:                    strPtr(fmt.Sprintf("REMOVE %s, %s", o, l)),
		ConditionExpression:                 strPtr(fmt.Sprintf("%s = :o AND attribute_not_exists(%s)", o, d)),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           map[string]types.AttributeValue{":o": str(owner)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if item, failed := conditionFailed(err); failed {
		return refused(item, id, owner)
	}
	if err != nil {
		return Pending{}, fmt.Errorf("release lane %s: %w", id, err)
	}
	return Pending{}, nil
}

// Renew extends owner's lease to until, as before a deferral that outlasts
// the lease. A lane owner lost meanwhile fails with a *NotOwnerError.
func (s *Store) Renew(ctx context.Context, id ID, owner string, until time.Time) error {
	names := map[string]string{}
	sfx := id.suffix()
	o, l := attr(names, "o", sfx, 0), attr(names, "l", sfx, 0)
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.Table,
		Key:                                 key(id),
		UpdateExpression:                    strPtr(fmt.Sprintf("SET %s = :l", l)),
		ConditionExpression:                 strPtr(o + " = :o"),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           map[string]types.AttributeValue{":o": str(owner), ":l": micros(until)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if item, failed := conditionFailed(err); failed {
		_, err := refused(item, id, "")
		return err
	}
	if err != nil {
		return fmt.Errorf("renew lane %s: %w", id, err)
	}
	return nil
}

// EndLease ends owner's lease now, in one write, leaving the lane's owner
// and pending elements in place: the next change takes the lane over as
// from an owner that died (Mark), and a job still carrying owner's token
// (redriven from the dead-letter queue) may claim it again. The same write
// marks the lane stranded and lists its item in the sweep index (see
// Sweeping), so that the pending elements are pushed again without waiting
// for a change. A lane that another owns, or whose lease owner already
// ended (a second delivery of the same job), fails with a *NotOwnerError.
//
// failed says the job's pushes failed at the vendor (refused, given up):
// only then does the lane count a failure, which backs its sweep off
// (SweepBackoff). A job that ended with no push sent (expired or shed
// behind a backlog or an outage) leaves the count as it was, so the sweep
// takes the lane up again at once however often that happens.
func (s *Store) EndLease(ctx context.Context, id ID, owner string, failed bool) error {
	now := s.now()
	names := map[string]string{"#sweep": SweepAttribute, "#sweepAt": SweepAtAttribute, "#sweepN": sweepCountAttribute}
	sfx := id.suffix()
	o, l, w := attr(names, "o", sfx, 0), attr(names, "l", sfx, 0), attr(names, "w", sfx, 0)
	add := "#sweepN :one"
	if failed {
		add = attr(names, "f", sfx, 0) + " :one, " + add
	}
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.Table,
		Key:       key(id),
		// sweep_at is set to now even if the item was listed for later
		// (another lane backing off): the sweep reads it once more and
		// sets the earliest time again, which a write cannot compute.
		UpdateExpression: strPtr(fmt.Sprintf("SET %s = :ended, %s = :now, #sweep = :part, #sweepAt = :now ADD %s", l, w, add)),
		// The Unix epoch: over for every process, whatever its clock.
		ConditionExpression:      strPtr(fmt.Sprintf("%s = :o AND %s > :ended", o, l)),
		ExpressionAttributeNames: names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": str(owner), ":ended": micros(time.UnixMicro(0)),
			":now": micros(now), ":part": str(SweepPartition), ":one": &types.AttributeValueMemberN{Value: "1"}},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if item, failed := conditionFailed(err); failed {
		_, err := refused(item, id, "")
		return err
	}
	if err != nil {
		return fmt.Errorf("end the lease on lane %s: %w", id, err)
	}
	return nil
}

// LeaseFor is the lease an owner needs to be back by slot: the slot plus a
// whole lease, so that late delivery and the push itself fit.
func (s *Store) LeaseFor(slot time.Time) time.Time { return slot.Add(s.lease()) }

// LeaseLength is how long an owner holds a lane between writes.
func (s *Store) LeaseLength() time.Duration { return s.lease() }
