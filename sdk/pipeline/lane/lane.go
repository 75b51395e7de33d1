package lane

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// SortKey is the sort key of a lane item in the ARI state table.
const SortKey = "lanes"

// DefaultLease is how long an owner holds a lane without renewing it.
const DefaultLease = 2 * time.Minute

// ID names a lane.
type ID struct {
	Property, Kind                string
	Channel, Credential, HotelRef string
}

// suffix keys the lane's attributes within its item.
func (id ID) suffix() string { return id.Channel + "#" + id.Credential + "#" + id.HotelRef }

// String is the lane's name in logs and job ids. It spells out its
// suffix rather than calling it, so that it stays a leaf of a lane job's
// path (docs/design.md), which names its lane many times.
func (id ID) String() string {
	return id.Property + "#" + id.Kind + "#" + id.Channel + "#" + id.Credential + "#" + id.HotelRef
}

// DynamoDBAPI is the part of *dynamodb.Client the lane store uses: the
// sweep reads items (GetItem) it finds in the sweep index (Query).
type DynamoDBAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Store reads and writes lanes in the ARI state table.
type Store struct {
	DB    DynamoDBAPI
	Table string
	// Lease is how long an owner holds a lane between writes; DefaultLease
	// if zero.
	Lease time.Duration
	Now   func() time.Time
}

// Pending is a lane's state as one write left it.
type Pending struct {
	// Elements are the lane's pending elements, oldest change first.
	Elements []Element
	// Owner and LeaseUntil say who holds the lane; empty if nobody.
	Owner      string
	LeaseUntil time.Time
	// Version counts the writes that added elements (Mark, Compact), so
	// that Compact replaces exactly the elements it read.
	Version int64
}

// ErrRejected is matched by a Mark error that DynamoDB refused as invalid
// (the item over its 400 KB limit): retrying the same write cannot help,
// so the change belongs in the dead-letter queue with the reason.
var ErrRejected = errors.New("lane store rejected the mark")

// Mark is what marking did to one lane.
type Mark struct {
	Lane ID
	// Claimed: this change became the lane's owner (with the token it
	// offered) and must schedule its push. Otherwise an owner is already
	// on its way and will push this change's element too.
	Claimed bool
	// Fresh: the mark's own write made the change the owner of a lane
	// that had none, neither stranded (w) nor compacted (x), and Pending
	// is all the lane held then. Its push may go out without a Claim, in
	// the same process, while the lease lasts (see Pushing without a
	// claim). A takeover is never fresh.
	Fresh   bool
	Pending Pending
	// Unanswered is the token a takeover offered that failed without an
	// answer (the owner's lease had run out): the lane may be that
	// token's, a write that landed with its answer lost, so a job that
	// claims the lane offers it too (ClaimAfter's earlier).
	Unanswered string
}

// Mark adds els to every lane of one property and kind, in one write
// (several for a property with more connections than marksPerWrite), and
// makes token(lane) the owner of each lane that had none (or whose owner's
// lease ran out, which costs a second write). token is called once per
// lane. Tokens should be unique to the delivery (see Pushing without a
// claim): a second delivery of the same change then finds the lane owned
// and schedules nothing, or only a recheck. If a write fails, the lanes of
// the writes before it are marked and owned by their tokens all the same,
// as by a delivery that died after marking: their leases recover them.
// A takeover that fails is not the mark's failure: the lane is marked, and
// its Mark is the lane as the mark's write found it (its owner's lease run
// out) with the takeover's token Unanswered, which a caller rechecks as it
// does any lane whose lease runs out.
func (s *Store) Mark(ctx context.Context, lanes []ID, els []Element, token func(ID) string) ([]Mark, error) {
	if len(lanes) == 0 || len(els) == 0 {
		return nil, nil
	}
	tokens := make(map[ID]string, len(lanes))
	for _, id := range lanes {
		tokens[id] = token(id)
	}
	token = func(id ID) string { return tokens[id] }
	now := s.now()
	lease := now.Add(s.lease())
	set := elementSet(uniqueElements(els))
	marks := make([]Mark, 0, len(lanes))
	for _, part := range chunks(lanes, marksPerWrite) {
		names := map[string]string{}
		vals := map[string]types.AttributeValue{":e": set, ":l": micros(lease), ":one": &types.AttributeValueMemberN{Value: "1"}}
		update := markUpdate(names, vals, part, token)
		out, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &s.Table,
			Key:                       key(part[0]),
			UpdateExpression:          &update,
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: vals,
			ReturnValues:              types.ReturnValueAllNew,
		})
		if isValidation(err) {
			return nil, fmt.Errorf("%w: lanes of %s#%s: %v", ErrRejected, part[0].Property, part[0].Kind, err)
		}
		if err != nil {
			return nil, fmt.Errorf("mark lanes of %s#%s: %w", part[0].Property, part[0].Kind, err)
		}
		for _, id := range part {
			p, err := pendingOf(out.Attributes, id)
			if err != nil {
				return nil, err
			}
			m := Mark{Lane: id, Claimed: p.Owner == token(id), Pending: p}
			m.Fresh = m.Claimed && settled(out.Attributes, id)
			if !m.Claimed && p.Owner != "" && p.LeaseUntil.Before(now) {
				// The owner's lease ran out: it died between its writes.
				// Failing the mark over one lane's takeover would fail the
				// change, and its copy would meet every lane whose lease
				// has run out again, the failed delivery's own takeovers
				// among them, each a write that may fail: with 50
				// connections a property nearly every copy fails.
				if taken, ok, err := s.takeOver(ctx, id, p, token(id), lease); err == nil {
					m.Pending, m.Claimed = taken, ok
				} else {
					m.Unanswered = token(id)
				}
			}
			marks = append(marks, m)
		}
	}
	return marks, nil
}

// markUpdate is the update expression of one Mark write of lanes,
// registering its names and each lane's token (:t<i>) as it goes. The
// placeholders number the lanes of this write from 0, so its length
// depends on len(lanes) only.
func markUpdate(names map[string]string, vals map[string]types.AttributeValue, lanes []ID, token func(ID) string) string {
	var adds, sets []string
	for i, id := range lanes {
		sfx := id.suffix()
		d, o, l, v := attr(names, "d", sfx, i), attr(names, "o", sfx, i), attr(names, "l", sfx, i), attr(names, "v", sfx, i)
		vals[fmt.Sprintf(":t%d", i)] = &types.AttributeValueMemberS{Value: token(id)}
		adds = append(adds, d+" :e", v+" :one")
		sets = append(sets, fmt.Sprintf("%s = if_not_exists(%s, :t%d), %s = if_not_exists(%s, :l)", o, o, i, l, l))
	}
	return "ADD " + strings.Join(adds, ", ") + " SET " + strings.Join(sets, ", ")
}

func (s *Store) takeOver(ctx context.Context, id ID, was Pending, token string, lease time.Time) (Pending, bool, error) {
	names := map[string]string{}
	sfx := id.suffix()
	o, l := attr(names, "o", sfx, 0), attr(names, "l", sfx, 0)
	out, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.Table,
		Key:                                 key(id),
		UpdateExpression:                    strPtr(fmt.Sprintf("SET %s = :t, %s = :l", o, l)),
		ConditionExpression:                 strPtr(fmt.Sprintf("%s = :old AND %s = :oldl", o, l)),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           map[string]types.AttributeValue{":t": str(token), ":l": micros(lease), ":old": str(was.Owner), ":oldl": micros(was.LeaseUntil)},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if item, failed := conditionFailed(err); failed {
		p, err := pendingOf(item, id) // someone else took it first, or renewed
		return p, err == nil && tookOver(p, token, lease), err
	}
	if err != nil {
		return Pending{}, false, fmt.Errorf("take over lane %s: %w", id, err)
	}
	p, err := pendingOf(out.Attributes, id)
	return p, err == nil, err
}

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
//
// A compaction since the previous push read the lane (x) clears nothing:
// done is then no longer what it names. A merged element stands for every
// element it replaced, and one equal to an element the push carried (its
// block's, the newest sequence unchanged by a late change of an older one)
// also stands for dates marked after the push read their state. So the
// claim is refused while x is up and sent again without done: what the
// push carried stays pending and goes again, a date twice, never one less.
func (s *Store) ClaimAfter(ctx context.Context, id ID, token string, earlier []string, next string, done []Element) (Pending, error) {
	p, err := s.claimAfter(ctx, id, token, earlier, next, done, len(done) > 0)
	var compacted *compactedError
	if errors.As(err, &compacted) {
		return s.claimAfter(ctx, id, token, earlier, next, nil, true)
	}
	return p, err
}

// compactedError is a claim clearing done refused for the lane's x alone.
type compactedError struct{}

func (*compactedError) Error() string { return "lane compacted since its push read it" }

// claimAfter is ClaimAfter's write; delivered says the previous push got
// through, which ends the lane's failures (f).
func (s *Store) claimAfter(ctx context.Context, id ID, token string, earlier []string, next string, done []Element, delivered bool) (Pending, error) {
	now := s.now()
	names := map[string]string{}
	sfx := id.suffix()
	o, l, x := attr(names, "o", sfx, 0), attr(names, "l", sfx, 0), attr(names, "x", sfx, 0)
	vals := map[string]types.AttributeValue{":next": str(next), ":t": str(token), ":l": micros(now.Add(s.lease())), ":now": micros(now)}
	// next is known only to this invocation: listed, the lane reaches the
	// sweep should it die before its next write.
	set, add := listing(names, vals)
	update := fmt.Sprintf("SET %s = :next, %s = :l, %s ADD %s", o, l, set, add)
	owned := o + " = :t"
	for i, e := range earlier[max(0, len(earlier)-MaxUnanswered):] {
		vals[fmt.Sprintf(":e%d", i)] = str(e)
		owned += fmt.Sprintf(" OR %s = :e%d", o, i)
	}
	owned += fmt.Sprintf(" OR %s < :now", l)
	cond := owned
	// A claim takes the lane up: it is no longer stranded. It reads what
	// is pending now, so a compaction before it (x) is part of what its
	// push carries. done is what the previous push delivered, so the lane
	// is no longer failing.
	remove := " REMOVE " + attr(names, "w", sfx, 0) + ", " + x
	if len(done) > 0 {
		update += " DELETE " + attr(names, "d", sfx, 0) + " :done"
		vals[":done"] = elementSet(done)
		cond = fmt.Sprintf("(%s) AND attribute_not_exists(%s)", owned, x)
	}
	if delivered {
		remove += ", " + attr(names, "f", sfx, 0)
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
		if _, up := item["x:"+sfx]; up && len(done) > 0 {
			return Pending{}, &compactedError{}
		}
		_, err := refused(item, id, "")
		return Pending{}, err
	}
	if err != nil {
		return Pending{}, fmt.Errorf("claim lane %s: %w", id, err)
	}
	return pendingOf(out.Attributes, id)
}

func (s *Store) lease() time.Duration {
	if s.Lease > 0 {
		return s.Lease
	}
	return DefaultLease
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// key is the key of the item that holds the lanes of id's property and
// kind.
func key(id ID) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: id.Property + "#" + id.Kind},
		"sk": &types.AttributeValueMemberS{Value: SortKey},
	}
}

// attr registers the name of one of a lane's attributes (kind d, o, l,
// ..., the lane by its suffix, which a write reads once per lane) as
// #<kind><i>; DynamoDB refuses names an expression does not use, so each
// write registers only its own.
func attr(names map[string]string, kind, suffix string, i int) string {
	n := fmt.Sprintf("#%s%d", kind, i)
	names[n] = kind + ":" + suffix
	return n
}

func pendingOf(item map[string]types.AttributeValue, id ID) (Pending, error) {
	var p Pending
	if set, ok := item["d:"+id.suffix()].(*types.AttributeValueMemberSS); ok {
		for _, s := range set.Value {
			e, err := ParseElement(s)
			if err != nil {
				return Pending{}, err
			}
			p.Elements = append(p.Elements, e)
		}
	}
	sortElements(p.Elements)
	if o, ok := item["o:"+id.suffix()].(*types.AttributeValueMemberS); ok {
		p.Owner = o.Value
	}
	if v, ok := item["v:"+id.suffix()].(*types.AttributeValueMemberN); ok {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return Pending{}, fmt.Errorf("lane %s: version %q: %w", id, v.Value, err)
		}
		p.Version = n
	}
	if l, ok := item["l:"+id.suffix()].(*types.AttributeValueMemberN); ok {
		us, err := strconv.ParseInt(l.Value, 10, 64)
		if err != nil {
			return Pending{}, fmt.Errorf("lane %s: lease %q: %w", id, l.Value, err)
		}
		p.LeaseUntil = time.UnixMicro(us)
	}
	return p, nil
}

// settled reports whether the lane is neither stranded (w) nor compacted
// (x) in item: a Claim would have nothing to remove.
func settled(item map[string]types.AttributeValue, id ID) bool {
	_, w := item["w:"+id.suffix()]
	_, x := item["x:"+id.suffix()]
	return !w && !x
}

// refused reads the lane from the item a failed condition handed back. It
// is a *NotOwnerError unless owner still holds the lane (owner "": always,
// for writes whose condition failing means the lane is someone else's).
func refused(item map[string]types.AttributeValue, id ID, owner string) (Pending, error) {
	p, err := pendingOf(item, id)
	if err != nil {
		return Pending{}, err
	}
	if owner == "" || p.Owner != owner {
		return p, &NotOwnerError{Lane: id, Pending: p}
	}
	return p, nil
}

// isValidation reports whether DynamoDB refused the request itself (the
// item over 400 KB): a property of the request, not of the moment.
func isValidation(err error) bool {
	var coded interface{ ErrorCode() string }
	return errors.As(err, &coded) && coded.ErrorCode() == "ValidationException"
}

func conditionFailed(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

func micros(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMicro(), 10)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func strPtr(s string) *string { return &s }
