package sim

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// minidyn v0.8.2 gets two kinds of update wrong, both on the lanes' item:
//   - in the lanes' Claim (SET … DELETE #d :done REMOVE …), a DELETE of 3
//     of a string set's 6 elements left the attribute NULL, where DynamoDB
//     leaves the other 3;
//   - in Finish (DELETE #d :done REMOVE #o, #l, #f), the REMOVE after a
//     DELETE is ignored: the finished owner keeps the lane and its lease,
//     and every later change finds it owned and schedules nothing.
//
// fixSets recomputes every ADD, DELETE and REMOVE clause of an update that
// succeeded from the item before it, as DynamoDB defines them (a set
// union or difference, an attribute removed when its set empties, a
// number added, an attribute removed), and returns the corrected item if
// minidyn's differs.

var clauseKeyword = regexp.MustCompile(`\b(SET|ADD|DELETE|REMOVE)\b`)

// setClause is one "path value" of an ADD or DELETE section.
type setClause struct {
	op          string
	path, value string
}

// clauseCache holds setClauses by update expression: the SDK sends a few
// expressions many times.
var clauseCache sync.Map // string → []setClause

func setClauses(update string) []setClause {
	if v, ok := clauseCache.Load(update); ok {
		return v.([]setClause)
	}
	out := parseClauses(update)
	clauseCache.Store(update, out)
	return out
}

func parseClauses(update string) []setClause {
	idx := clauseKeyword.FindAllStringSubmatchIndex(update, -1)
	var out []setClause
	for i, m := range idx {
		op := update[m[2]:m[3]]
		end := len(update)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		if op == "SET" {
			continue
		}
		for _, part := range strings.Split(update[m[1]:end], ",") {
			f := strings.Fields(part)
			switch {
			case op == "REMOVE" && len(f) == 1:
				out = append(out, setClause{op: op, path: f[0]})
			case len(f) == 2:
				out = append(out, setClause{op: op, path: f[0], value: f[1]})
			}
		}
	}
	return out
}

func fixSets(before, after map[string]types.AttributeValue, in *dynamodb.UpdateItemInput) (map[string]types.AttributeValue, bool) {
	clauses := setClauses(aws.ToString(in.UpdateExpression))
	if len(clauses) == 0 {
		return nil, false
	}
	// after is a fresh rendering that nothing else holds, and the clauses
	// replace values rather than change them: a shallow copy will do.
	fixed := maps.Clone(after)
	if fixed == nil {
		fixed = map[string]types.AttributeValue{}
	}
	changed := false
	for _, c := range clauses {
		name := c.path
		if n, ok := in.ExpressionAttributeNames[c.path]; ok {
			name = n
		}
		want, remove := applyClause(c.op, before[name], in.ExpressionAttributeValues[c.value])
		if c.op == "REMOVE" {
			want, remove = nil, true
		}
		got, has := fixed[name]
		switch {
		case remove && has:
			delete(fixed, name)
			changed = true
		case !remove && (!has || !sameValue(got, want)):
			fixed[name] = want
			changed = true
		}
	}
	return fixed, changed
}

// applyClause is DynamoDB's ADD or DELETE of v to old; remove says the
// attribute is gone (a set emptied).
func applyClause(op string, old, v types.AttributeValue) (types.AttributeValue, bool) {
	switch v := v.(type) {
	case *types.AttributeValueMemberSS:
		var cur []string
		if o, ok := old.(*types.AttributeValueMemberSS); ok {
			cur = slices.Clone(o.Value)
		}
		for _, e := range v.Value {
			i := slices.Index(cur, e)
			switch {
			case op == "ADD" && i < 0:
				cur = append(cur, e)
			case op == "DELETE" && i >= 0:
				cur = slices.Delete(cur, i, i+1)
			}
		}
		if len(cur) == 0 {
			return nil, true
		}
		return &types.AttributeValueMemberSS{Value: cur}, false
	case *types.AttributeValueMemberN:
		sum := num(v.Value)
		if o, ok := old.(*types.AttributeValueMemberN); ok {
			sum += num(o.Value)
		}
		return &types.AttributeValueMemberN{Value: strconv.FormatFloat(sum, 'f', -1, 64)}, false
	}
	return old, old == nil
}

func num(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func sameValue(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for _, e := range a.Value {
			if !slices.Contains(b.Value, e) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && num(a.Value) == num(b.Value)
	}
	return false
}

// copyItem deep-copies an item, so that nothing minidyn stores aliases a
// caller's slices.
func copyItem(m map[string]types.AttributeValue) map[string]types.AttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v types.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = copyValue(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: copyItem(v.Value)}
	}
	return v
}
