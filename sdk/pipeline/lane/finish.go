package lane

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Done is one lane's part of FinishAll: the owner that pushed it and the
// elements the push carried.
type Done struct {
	Lane     ID
	Owner    string
	Elements []Element
}

// Finish clears done and releases the lane, in one write, if done is all
// that is pending: FinishAll's write for one lane. released is false, with
// nothing changed, when more is pending (new changes arrived during the
// push, or Compact merged what was pending meanwhile): owner keeps the
// lane, its next push's Claim clears done, and pending is the lane as the
// refused write found it (done included). A lane owner lost meanwhile
// fails with a *NotOwnerError.
func (s *Store) Finish(ctx context.Context, id ID, owner string, done []Element) (released bool, pending Pending, err error) {
	if len(done) == 0 {
		p, err := s.Release(ctx, id, owner)
		return err == nil && len(p.Elements) == 0, p, err
	}
	names, vals := map[string]string{}, map[string]types.AttributeValue{}
	update, cond := finishExpressions(names, vals, []Done{{Lane: id, Owner: owner, Elements: done}})
	_, err = s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.Table,
		Key:                                 key(id),
		UpdateExpression:                    &update,
		ConditionExpression:                 &cond,
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if item, failed := conditionFailed(err); failed {
		p, err := refused(item, id, owner)
		if err != nil && leftReleased(p) {
			return true, Pending{}, nil // as this write, sent again after its answer was lost, left it
		}
		return false, p, err
	}
	if err != nil {
		return false, Pending{}, fmt.Errorf("finish lane %s: %w", id, err)
	}
	return true, Pending{}, nil
}

// Finished is what FinishAll did to one lane, as Finish returns it.
type Finished struct {
	Released bool
	Pending  Pending
	Err      error
}

// FinishAll finishes lanes of one item (one property and kind) with one
// write when it can (one per finishesPerWrite lanes): it clears each
// lane's done elements and releases it, on the same condition as Finish
// for every lane (its owner, nothing else pending, no compaction since).
// If any lane's condition fails, that write changes nothing and each of
// its lanes is finished on its own (Finish), so that no lane is released
// with something pending and none is left owned with nothing: the refused
// write costs one failed condition more. out[i] is lanes[i]'s.
func (s *Store) FinishAll(ctx context.Context, lanes []Done) []Finished {
	out := make([]Finished, len(lanes))
	if len(lanes) == 1 || !finishableTogether(lanes) {
		s.finishEach(ctx, lanes, out)
		return out
	}
	for i, part := range chunks(lanes, finishesPerWrite) {
		s.finishTogether(ctx, part, out[i*finishesPerWrite:])
	}
	return out
}

// finishesPerWrite is how many lanes one FinishAll write finishes: as many
// as keep its update and condition expressions within DynamoDB's limits
// (the condition's 7 operators a lane bind first, at 42 lanes).
var finishesPerWrite = perWrite(func(n int) []string {
	update, cond := finishExpressions(map[string]string{}, map[string]types.AttributeValue{}, make([]Done, n))
	return []string{update, cond}
})

// finishTogether finishes lanes with one write, or each on its own if
// any lane's condition fails; out[i] is lanes[i]'s.
func (s *Store) finishTogether(ctx context.Context, lanes []Done, out []Finished) {
	if len(lanes) == 1 {
		s.finishEach(ctx, lanes, out)
		return
	}
	names := map[string]string{}
	vals := map[string]types.AttributeValue{}
	update, cond := finishExpressions(names, vals, lanes)
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.Table,
		Key:                       key(lanes[0].Lane),
		UpdateExpression:          &update,
		ConditionExpression:       &cond,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	})
	if _, failed := conditionFailed(err); failed {
		// Some lane has more pending, or another owner: each on its own
		// says which, and releases the others.
		s.finishEach(ctx, lanes, out)
		return
	}
	for i := range lanes {
		out[i] = Finished{Released: err == nil}
		if err != nil {
			out[i].Err = fmt.Errorf("finish lanes of %s#%s: %w", lanes[0].Lane.Property, lanes[0].Lane.Kind, err)
		}
	}
}

// finishExpressions are the update and condition expressions of one
// Finish or FinishAll write of lanes, registering names and values as they go. The
// placeholders number the lanes of this write from 0, so the lengths
// depend on len(lanes) only.
func finishExpressions(names map[string]string, vals map[string]types.AttributeValue, lanes []Done) (update, cond string) {
	var dels, removes, conds []string
	for i, ln := range lanes {
		sfx := ln.Lane.suffix()
		d, o, l, f, x := attr(names, "d", sfx, i), attr(names, "o", sfx, i), attr(names, "l", sfx, i), attr(names, "f", sfx, i), attr(names, "x", sfx, i)
		vals[fmt.Sprintf(":done%d", i)] = elementSet(ln.Elements)
		vals[fmt.Sprintf(":o%d", i)] = str(ln.Owner)
		vals[fmt.Sprintf(":n%d", i)] = &types.AttributeValueMemberN{Value: strconv.Itoa(len(ln.Elements))}
		dels = append(dels, fmt.Sprintf("%s :done%d", d, i))
		removes = append(removes, o, l, f)
		// Only the owner removes elements (and Compact, which raises x)
		// and done were all pending when the push read them, so a set of
		// done's size is exactly done.
		conds = append(conds, fmt.Sprintf("(%s = :o%d AND size(%s) = :n%d AND attribute_not_exists(%s))", o, i, d, i, x))
	}
	return "DELETE " + strings.Join(dels, ", ") + " REMOVE " + strings.Join(removes, ", "), strings.Join(conds, " AND ")
}

// finishableTogether reports whether lanes are distinct lanes of one item,
// each with something done: a lane with nothing done only releases
// (Release), and one lane twice is two writes' worth of conditions.
func finishableTogether(lanes []Done) bool {
	seen := map[ID]bool{}
	for _, ln := range lanes {
		if len(ln.Elements) == 0 || seen[ln.Lane] || ln.Lane.Property != lanes[0].Lane.Property || ln.Lane.Kind != lanes[0].Lane.Kind {
			return false
		}
		seen[ln.Lane] = true
	}
	return true
}

func (s *Store) finishEach(ctx context.Context, lanes []Done, out []Finished) {
	for i, ln := range lanes {
		out[i].Released, out[i].Pending, out[i].Err = s.Finish(ctx, ln.Lane, ln.Owner, ln.Elements)
	}
}
