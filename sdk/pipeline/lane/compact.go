package lane

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// dateLayout is the format of an element's From and To.
const dateLayout = "2006-01-02"

// Coalesce merges els so that each cell (room type, rate plan) has at most
// one element per block of blockDays dates (blocks are aligned on the Unix
// epoch's day numbers): an element that crosses blocks is split at their
// edge, and the elements of one cell and block become one, from the
// earliest date to the latest, with the newest sequence. Every date of els
// stays covered, and a merged element never spans more than blockDays, so
// it fits wherever one change does. The result is sorted as Pending's
// elements are. An element whose dates do not parse is kept as it is.
// Bulk elements merge only with bulk ones: a live change merged into a
// resync's block would go out at the bulk class, and a resync's dates in
// a change's at the live one.
func Coalesce(els []Element, blockDays int) []Element {
	if blockDays < 1 {
		blockDays = 1
	}
	type key struct {
		room, plan string
		block      int64
		bulk       bool
	}
	merged := map[key]*Element{}
	var kept []Element
	for _, e := range els {
		from, err1 := time.Parse(dateLayout, e.From)
		to, err2 := time.Parse(dateLayout, e.To)
		if err1 != nil || err2 != nil || to.Before(from) {
			kept = append(kept, e)
			continue
		}
		for first, last := day(from), day(to); first <= last; {
			block := floorDiv(first, int64(blockDays))
			end := min(last, (block+1)*int64(blockDays)-1)
			k := key{e.RoomType, e.RatePlan, block, e.Bulk()}
			m := merged[k]
			if m == nil {
				m = &Element{RoomType: e.RoomType, RatePlan: e.RatePlan, From: date(first), To: date(end), Sequence: e.Sequence}
				merged[k] = m
			}
			// Dates in dateLayout sort as strings.
			m.From, m.To = min(m.From, date(first)), max(m.To, date(end))
			m.Sequence = max(m.Sequence, e.Sequence)
			first = end + 1
		}
	}
	out := uniqueElements(kept)
	for _, m := range merged {
		out = append(out, *m)
	}
	out = uniqueElements(out)
	sortElements(out)
	return out
}

// Compact replaces the pending elements of lane id, as seen (a Mark's
// answer) found them, by merged (Coalesce of seen.Elements), in one write.
// It applies only if the lane is as seen left it: the same owner, and no
// write added elements since (Version, and the number of elements, which
// the previous release's marks change without a version); otherwise it changes nothing and
// reports false, and a later mark tries again. A lane nobody owns is left
// alone: the mark that finds it claims it and pushes all of it soon.
//
// The write raises the lane's x flag, which makes the owner's next Finish
// refuse: a push in flight may have read elements merged away here, and
// only its next claim, which clears what the push carried, knows what is
// still to send.
func (s *Store) Compact(ctx context.Context, id ID, seen Pending, merged []Element) (bool, error) {
	if seen.Owner == "" || len(merged) == 0 {
		return false, nil
	}
	names := map[string]string{}
	sfx := id.suffix()
	d, o, v, x := attr(names, "d", sfx, 0), attr(names, "o", sfx, 0), attr(names, "v", sfx, 0), attr(names, "x", sfx, 0)
	vals := map[string]types.AttributeValue{
		":m": elementSet(uniqueElements(merged)), ":o": str(seen.Owner), ":one": &types.AttributeValueMemberN{Value: "1"},
		":x": &types.AttributeValueMemberBOOL{Value: true},
	}
	// The version fences off this release's marks, and the size of d
	// those of the previous release, which add elements without bumping
	// v (in a rolling deploy): either would add an element the merge
	// does not hold. Only the owner removes elements, so an unchanged
	// owner and size is the set seen read.
	cond := fmt.Sprintf("%s = :o AND attribute_not_exists(%s) AND size(%s) = :n", o, v, d)
	if seen.Version > 0 {
		cond = fmt.Sprintf("%s = :o AND %s = :v AND size(%s) = :n", o, v, d)
		vals[":v"] = &types.AttributeValueMemberN{Value: fmt.Sprint(seen.Version)}
	}
	vals[":n"] = &types.AttributeValueMemberN{Value: fmt.Sprint(len(seen.Elements))}
	_, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.Table,
		Key:                       key(id),
		UpdateExpression:          strPtr(fmt.Sprintf("SET %s = :m, %s = :x ADD %s :one", d, x, v)),
		ConditionExpression:       &cond,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	})
	if _, failed := conditionFailed(err); failed {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("compact lane %s: %w", id, err)
	}
	return true, nil
}

func sortElements(els []Element) {
	sort.Slice(els, func(i, j int) bool {
		a, b := els[i], els[j]
		if a.Sequence != b.Sequence {
			return a.Sequence < b.Sequence
		}
		return a.String() < b.String()
	})
}

func day(t time.Time) int64 { return t.Unix() / 86400 }

func date(day int64) string { return time.Unix(day*86400, 0).UTC().Format(dateLayout) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
