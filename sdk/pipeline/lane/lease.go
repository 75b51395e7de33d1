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
		p, err := refused(item, id, owner)
		if err != nil && leftReleased(p) {
			return Pending{}, nil // as this write, sent again after its answer was lost, left it
		}
		return p, err
	}
	if err != nil {
		return Pending{}, fmt.Errorf("release lane %s: %w", id, err)
	}
	return Pending{}, nil
}

// Renew extends owner's lease to until, as before a deferral, and lists
// the lane item for the sweep at the lease's end (listing): should every
// invocation that receives the deferred job die before it writes, the
// sweep takes the lane over once the lease is over. A lane owner lost
// meanwhile fails with a *NotOwnerError.
func (s *Store) Renew(ctx context.Context, id ID, owner string, until time.Time) error {
	names := map[string]string{}
	sfx := id.suffix()
	o, l := attr(names, "o", sfx, 0), attr(names, "l", sfx, 0)
	vals := map[string]types.AttributeValue{":o": str(owner), ":l": micros(until)}
	set, add := listing(names, vals)
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.Table,
		Key:                                 key(id),
		UpdateExpression:                    strPtr(fmt.Sprintf("SET %s = :l, %s ADD %s", l, set, add)),
		ConditionExpression:                 strPtr(o + " = :o"),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
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
	names := map[string]string{}
	sfx := id.suffix()
	o, l := attr(names, "o", sfx, 0), attr(names, "l", sfx, 0)
	set, add, vals := s.stranding(names, sfx, failed)
	end := endMark()
	vals[":o"], vals[":end"], vals[":epoch"] = str(owner), micros(end), micros(time.UnixMicro(0))
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &s.Table,
		Key:              key(id),
		UpdateExpression: strPtr(fmt.Sprintf("SET %s = :end, %s ADD %s", l, set, add)),
		// A lease at or before the Unix epoch was ended (endMark).
		ConditionExpression:                 strPtr(fmt.Sprintf("%s = :o AND %s > :epoch", o, l)),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if item, failed := conditionFailed(err); failed {
		p, err := refused(item, id, "")
		if p.Owner == owner && tookOver(p, owner, end) {
			return nil // this call's end, sent again after its answer was lost
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("end the lease on lane %s: %w", id, err)
	}
	return nil
}

// Strand lists the lane for the sweep as EndLease does, in one write, but
// whoever owns it and leaving the lease as it is: the sweep takes the lane
// over once that lease has run out (at once if it has), with whatever is
// pending then; a live owner's lane is only looked at again when its lease
// ends. It is for a job that must hand its lane to the sweep though the
// lane is held under a token it does not know: a claim of an earlier
// delivery of the same message, whose invocation died (syncer's last
// receive). A lane with nothing pending is left as it is. failed counts a
// failure, as for EndLease.
func (s *Store) Strand(ctx context.Context, id ID, failed bool) error {
	names := map[string]string{}
	sfx := id.suffix()
	d := attr(names, "d", sfx, 0)
	set, add, vals := s.stranding(names, sfx, failed)
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        &s.Table,
		Key:              key(id),
		UpdateExpression: strPtr(fmt.Sprintf("SET %s ADD %s", set, add)),
		// Nothing pending, nothing to sweep: no item is made or listed.
		ConditionExpression:       strPtr("attribute_exists(" + d + ")"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	})
	if _, failed := conditionFailed(err); failed {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list lane %s for the sweep: %w", id, err)
	}
	return nil
}

// stranding is the part of a write that marks a lane stranded now (w) and
// lists its item in the sweep index (see Sweeping): its SET and ADD
// clauses and their values. failed also counts a failure (f).
func (s *Store) stranding(names map[string]string, sfx string, failed bool) (set, add string, vals map[string]types.AttributeValue) {
	names["#sweep"], names["#sweepAt"], names["#sweepN"] = SweepAttribute, SweepAtAttribute, sweepCountAttribute
	w := attr(names, "w", sfx, 0)
	add = "#sweepN :one"
	if failed {
		add = attr(names, "f", sfx, 0) + " :one, " + add
	}
	now := micros(s.now())
	// sweep_at is set to now even if the item was listed for later
	// (another lane backing off): the sweep reads it once more and sets
	// the earliest time again, which a write cannot compute.
	set = fmt.Sprintf("%s = :now, #sweep = :part, #sweepAt = :now", w)
	vals = map[string]types.AttributeValue{":now": now, ":part": str(SweepPartition), ":one": &types.AttributeValueMemberN{Value: "1"}}
	return set, add, vals
}

// LeaseFor is the lease an owner needs to be back by slot: the slot plus a
// whole lease, so that late delivery and the push itself fit.
func (s *Store) LeaseFor(slot time.Time) time.Time { return slot.Add(s.lease()) }

// LeaseLength is how long an owner holds a lane between writes.
func (s *Store) LeaseLength() time.Duration { return s.lease() }
