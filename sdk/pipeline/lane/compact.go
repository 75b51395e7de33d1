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
	_, ok, err := s.replace(ctx, id, seen, merged, true)
	return ok, err
}

// MergeClaimed replaces the pending elements a claim returned (claimed,
// whose Owner is the claim's next token) by merged, in one write, on the
// same conditions as Compact, and returns what the lane then holds. The
// owner writes it after its claim and before its push reads any state, so
// no push in flight read the elements it replaces and the x flag stays
// down: the push's Finish clears the merged elements it carries. It
// reports false, changing nothing, if a mark added elements since the
// claim or the lane is no longer claimed's owner's.
func (s *Store) MergeClaimed(ctx context.Context, id ID, claimed Pending, merged []Element) (Pending, bool, error) {
	if claimed.Owner == "" || len(merged) == 0 {
		return claimed, false, nil
	}
	return s.replace(ctx, id, claimed, merged, false)
}

// replace is Compact's and MergeClaimed's write; compacted raises x.
func (s *Store) replace(ctx context.Context, id ID, seen Pending, merged []Element, compacted bool) (Pending, bool, error) {
	names := map[string]string{}
	sfx := id.suffix()
	d, o, v := attr(names, "d", sfx, 0), attr(names, "o", sfx, 0), attr(names, "v", sfx, 0)
	vals := map[string]types.AttributeValue{
		":m": elementSet(uniqueElements(merged)), ":o": str(seen.Owner), ":one": &types.AttributeValueMemberN{Value: "1"},
	}
	set := fmt.Sprintf("SET %s = :m", d)
	if compacted {
		vals[":x"] = &types.AttributeValueMemberBOOL{Value: true}
		set += fmt.Sprintf(", %s = :x", attr(names, "x", sfx, 0))
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
	out, err := s.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.Table,
		Key:                       key(id),
		UpdateExpression:          strPtr(fmt.Sprintf("%s ADD %s :one", set, v)),
		ConditionExpression:       &cond,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if _, failed := conditionFailed(err); failed {
		return seen, false, nil
	}
	if err != nil {
		return seen, false, fmt.Errorf("compact lane %s: %w", id, err)
	}
	p, err := pendingOf(out.Attributes, id)
	return p, err == nil, err
}

// Merge is Coalesce that adds no date: each cell's pending dates (a
// resync's apart from a change's) become runs of consecutive dates within
// a block of blockDays, one element each, with the newest sequence of the
// elements that held its dates. It reports whether any date was in two
// elements, the only case in which merging sends fewer items. An element
// whose dates do not parse is kept as it is.
func Merge(els []Element, blockDays int) (merged []Element, overlapped bool) {
	blockDays = max(blockDays, 1)
	type cell struct {
		room, plan string
		bulk       bool
	}
	days := map[cell]map[int64]int64{} // day → newest sequence
	var kept []Element
	for _, e := range els {
		from, err1 := time.Parse(dateLayout, e.From)
		to, err2 := time.Parse(dateLayout, e.To)
		if err1 != nil || err2 != nil || to.Before(from) {
			kept = append(kept, e)
			continue
		}
		c := cell{e.RoomType, e.RatePlan, e.Bulk()}
		if days[c] == nil {
			days[c] = map[int64]int64{}
		}
		for d := day(from); d <= day(to); d++ {
			seq, ok := days[c][d]
			overlapped = overlapped || ok
			days[c][d] = max(seq, e.Sequence)
		}
	}
	out := uniqueElements(kept)
	for c, seqs := range days {
		ds := make([]int64, 0, len(seqs))
		for d := range seqs {
			ds = append(ds, d)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		for i := 0; i < len(ds); {
			j, seq := i, seqs[ds[i]]
			for j+1 < len(ds) && ds[j+1] == ds[j]+1 && floorDiv(ds[j+1], int64(blockDays)) == floorDiv(ds[i], int64(blockDays)) {
				j++
				seq = max(seq, seqs[ds[j]])
			}
			out = append(out, Element{RoomType: c.room, RatePlan: c.plan, From: date(ds[i]), To: date(ds[j]), Sequence: seq})
			i = j + 1
		}
	}
	out = uniqueElements(out)
	sortElements(out)
	return out, overlapped
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
