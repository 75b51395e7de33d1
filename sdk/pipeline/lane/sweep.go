package lane

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The sweep index: a sparse global secondary index of the state table
// (keys only) that holds the lane items with a lane that may be stranded.
const (
	SweepIndex       = "sweep"
	SweepAttribute   = "sweep"    // S, the index's partition key
	SweepAtAttribute = "sweep_at" // N (Unix µs), the index's sort key
	// SweepPartition is the one value of SweepAttribute: strandings are
	// rare, and one partition lets a sweep find them with one query.
	SweepPartition      = "lanes"
	sweepCountAttribute = "sweep_n"
)

// FirstSweepBackoff and MaxSweepBackoff shape SweepBackoff.
const (
	FirstSweepBackoff = 15 * time.Minute
	MaxSweepBackoff   = 4 * time.Hour
)

// SweepBackoff is how long after its stranding a lane whose pushes failed
// times times in a row (f:<lane>) is due for the sweep: at once with none
// or one (a job that expired or was shed sent nothing, and does not
// count), then FirstSweepBackoff, doubling up to MaxSweepBackoff, so that
// a lane whose pushes keep failing (a refused item, a revoked credential)
// costs the vendor a request per backoff rather than per sweep.
func SweepBackoff(times int) time.Duration {
	if times <= 1 {
		return 0
	}
	d := FirstSweepBackoff << min(times-2, 20)
	return min(d, MaxSweepBackoff)
}

// Item names a lane item: the lanes of one property and kind.
type Item struct{ Property, Kind string }

// Due lists the lane items whose sweep is due at now, at most limit (0:
// all), from the sweep index: one query, no scan.
func (s *Store) Due(ctx context.Context, limit int) ([]Item, error) {
	var items []Item
	in := &dynamodb.QueryInput{
		TableName:                &s.Table,
		IndexName:                strPtr(SweepIndex),
		KeyConditionExpression:   strPtr("#p = :p AND #at <= :now"),
		ExpressionAttributeNames: map[string]string{"#p": SweepAttribute, "#at": SweepAtAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": str(SweepPartition), ":now": micros(s.now()),
		},
	}
	for {
		out, err := s.DB.Query(ctx, in)
		if err != nil {
			return items, fmt.Errorf("query the sweep index %s of table %s (does the table have it? ari.CreateTable and the stack create it): %w", SweepIndex, s.Table, err)
		}
		for _, it := range out.Items {
			pk, _ := it["pk"].(*types.AttributeValueMemberS)
			if pk == nil {
				continue
			}
			// The kind is an endpoint name, which has no '#'.
			i := strings.LastIndex(pk.Value, "#")
			if i < 0 {
				continue
			}
			items = append(items, Item{Property: pk.Value[:i], Kind: pk.Value[i+1:]})
			if limit > 0 && len(items) >= limit {
				return items, nil
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// Sweep takes over every lane of item that is due (stranded, backed off
// long enough, its lease over and something pending), each with the owner
// token(lane), and returns them as claimed Marks: the caller schedules a
// push for each, as for a change that claimed its lane. It then sets the
// item's next sweep to the earliest lane still backing off, or takes the
// item out of the index if none is, unless a lane was stranded meanwhile.
//
// A taken-over lane stays marked stranded until its push's claim: if the
// caller dies before scheduling that push, the lease runs out and a later
// sweep takes the lane over again.
func (s *Store) Sweep(ctx context.Context, item Item, token func(ID) string) ([]Mark, error) {
	now := s.now()
	k := key(ID{Property: item.Property, Kind: item.Kind})
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.Table, Key: k, ConsistentRead: new(true)})
	if err != nil {
		return nil, fmt.Errorf("read lanes of %s#%s: %w", item.Property, item.Kind, err)
	}
	due, next, err := sweepPlan(item, out.Item, now)
	if err != nil {
		return nil, err
	}
	var marks []Mark
	for _, st := range due {
		lease := now.Add(s.lease())
		p, claimed, err := s.takeOver(ctx, st.Lane, st.Pending, token(st.Lane), lease)
		if err != nil {
			return marks, err
		}
		if claimed {
			marks = append(marks, Mark{Lane: st.Lane, Claimed: true, Pending: p})
			// Looked at again once the lease is over, in case the push
			// is never scheduled.
			next = earliest(next, lease)
		}
	}
	return marks, s.relist(ctx, k, out.Item[sweepCountAttribute], next)
}

// stranded is a lane the sweep found due.
type stranded struct {
	Lane    ID
	Pending Pending
}

// sweepPlan reads a lane item: the lanes due for the sweep at now, and
// when the item must be looked at next (zero: never, unless stranded or
// listed again). A lane is due when it is marked stranded or has an owner,
// has something pending, has no live owner, and its backoff is over: an
// owner whose lease ran out died (it renews before the lease ends), and
// the writes that give a deferred job's lane its lease list the item for
// that lease's end (listing). A lane with a live owner is looked at again
// when that lease runs out: the owner may die before its next write.
func sweepPlan(item Item, attrs map[string]types.AttributeValue, now time.Time) ([]stranded, time.Time, error) {
	var due []stranded
	var next time.Time
	seen := map[string]bool{}
	for name := range attrs {
		suffix, ok := strings.CutPrefix(name, "w:")
		if !ok {
			suffix, ok = strings.CutPrefix(name, "o:")
		}
		if !ok || seen[suffix] {
			continue
		}
		seen[suffix] = true
		parts := strings.SplitN(suffix, "#", 3)
		if len(parts) != 3 {
			return nil, time.Time{}, fmt.Errorf("lane item %s#%s: attribute %q does not name a lane", item.Property, item.Kind, name)
		}
		id := ID{Property: item.Property, Kind: item.Kind, Channel: parts[0], Credential: parts[1], HotelRef: parts[2]}
		p, err := pendingOf(attrs, id)
		if err != nil {
			return nil, time.Time{}, err
		}
		since, err1 := number(attrs["w:"+suffix])
		times, err2 := number(attrs["f:"+suffix])
		if err1 != nil || err2 != nil {
			return nil, time.Time{}, fmt.Errorf("lane %s: stranding marks %v, %v", id, err1, err2)
		}
		at := time.UnixMicro(since)
		if _, stranded := attrs["w:"+suffix]; !stranded {
			// An owner's lease that ran out with no write of its own
			// (listing): it died, and strands the lane from its lease's end.
			at = p.LeaseUntil
		}
		at = at.Add(SweepBackoff(int(times)))
		switch {
		case len(p.Elements) == 0:
			// Pushed meanwhile: nothing to sweep.
		case p.Owner != "" && !p.LeaseUntil.Before(now):
			next = earliest(next, p.LeaseUntil.Add(time.Second))
		case at.After(now):
			next = earliest(next, at)
		default:
			due = append(due, stranded{Lane: id, Pending: p})
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].Lane.String() < due[j].Lane.String() })
	return due, next, nil
}

// relist sets the item's next sweep to next, or takes it out of the index
// if next is zero, provided no lane was stranded since the item was read
// (its stranding count is still count). A stranding meanwhile listed the
// item for now, which stays.
func (s *Store) relist(ctx context.Context, k map[string]types.AttributeValue, count types.AttributeValue, next time.Time) error {
	if count == nil {
		return nil // not listed by a stranding: nothing of ours to change
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 &s.Table,
		Key:                       k,
		ConditionExpression:       strPtr("#n = :n"),
		ExpressionAttributeNames:  map[string]string{"#n": sweepCountAttribute, "#sweep": SweepAttribute, "#at": SweepAtAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": count},
	}
	if next.IsZero() {
		in.UpdateExpression = strPtr("REMOVE #sweep, #at")
	} else {
		in.UpdateExpression = strPtr("SET #sweep = :part, #at = :at")
		in.ExpressionAttributeValues[":part"] = str(SweepPartition)
		in.ExpressionAttributeValues[":at"] = micros(next)
	}
	_, err := s.DB.UpdateItem(ctx, in)
	if _, failed := conditionFailed(err); failed {
		return nil
	}
	if err != nil {
		return fmt.Errorf("relist lane item %v for the sweep: %w", k["pk"], err)
	}
	return nil
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// number reads an N attribute; a missing one is 0.
func number(v types.AttributeValue) (int64, error) {
	if v == nil {
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %T, want a number", v)
	}
	return strconv.ParseInt(n.Value, 10, 64)
}

// listing is the part of a write that gives a lane an owner's lease (:l)
// and lists its item in the sweep index for that lease's end (see
// Sweeping): its SET and ADD clauses, registering their names and :one.
// An owner that dies before its next write (a deferred job whose every
// receive dies before its first write lands, a claim that dies in its
// push) is then found by the sweep (sweepPlan: a lane with something
// pending and its lease over is due) with no write of the dying
// invocation. DynamoDB cannot take the earlier of two times in a write, so
// an item listed already keeps its time: the sweep reads it then and
// relists it for the earliest lease or backoff it finds, so a dead owner
// waits past its lease at most until the time the item was listed for.
// The count (sweep_n) keeps a sweep that read the item before this write
// from taking the listing away (relist).
func listing(names map[string]string, vals map[string]types.AttributeValue) (set, add string) {
	names["#sweep"], names["#sweepAt"], names["#sweepN"] = SweepAttribute, SweepAtAttribute, sweepCountAttribute
	vals[":part"], vals[":one"] = str(SweepPartition), &types.AttributeValueMemberN{Value: "1"}
	return "#sweep = :part, #sweepAt = if_not_exists(#sweepAt, :l)", "#sweepN :one"
}
