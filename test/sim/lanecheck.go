package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The lanes' own invariant, "no older state over a newer one" in the store:
// a lane's pending set names, for each date it holds, the newest change
// the PMS made there, and a write that replaces the set (a compaction
// merging elements) must not lower that for any date the set still holds.
// A date a push carried may leave the set, and a mark only adds; neither
// replaces it. The oracle reads the stored set with its own parsing of the
// documented element form ("room#plan#from#to#sequence", the "d:" string
// sets of a lanes item), apart from sdk/pipeline/lane.

// laneSetsReplaced are the lane sets ("d:…" attributes) that in assigns
// whole, by their attribute names.
func laneSetsReplaced(in *dynamodb.UpdateItemInput) []string {
	expr := ""
	if in.UpdateExpression != nil {
		expr = *in.UpdateExpression
	}
	var out []string
	for n, attr := range in.ExpressionAttributeNames {
		if strings.HasPrefix(attr, "d:") && strings.Contains(expr, n+" = ") {
			out = append(out, attr)
		}
	}
	return out
}

func stringSet(item map[string]types.AttributeValue, attr string) []string {
	if ss, ok := item[attr].(*types.AttributeValueMemberSS); ok {
		return append([]string(nil), ss.Value...)
	}
	return nil
}

// newestByDate is the newest sequence the elements hold for each
// (room, plan, date).
func newestByDate(els []string) map[string]int64 {
	out := map[string]int64{}
	for _, e := range els {
		f := strings.Split(e, "#")
		if len(f) != 5 {
			continue
		}
		seq, err1 := strconv.ParseInt(f[4], 10, 64)
		from, err2 := time.Parse("2006-01-02", f[2])
		to, err3 := time.Parse("2006-01-02", f[3])
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
			k := f[0] + "/" + f[1] + " " + d.Format("2006-01-02")
			out[k] = max(out[k], seq)
		}
	}
	return out
}

// laneWentBack compares a lane set before and after a write that replaced
// it: the first date still held whose newest sequence went down, or "".
func laneWentBack(before, after []string) string {
	if len(before) == 0 || len(after) == 0 {
		return ""
	}
	was, now := newestByDate(before), newestByDate(after)
	worst := ""
	for k, seq := range now {
		if old, ok := was[k]; ok && seq < old && (worst == "" || k < worst) {
			worst = k
		}
	}
	if worst == "" {
		return ""
	}
	return fmt.Sprintf("%s: sequence %d before, %d after (%d elements replaced by %d)", worst, was[worst], now[worst], len(before), len(after))
}
