package sim

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// laneItems describes, for a run that ends with dirty lanes, each lane item
// as the state store holds it: the item's sweep listing and, per lane with
// something pending or of a property and kind some OTA is behind on, its
// owner, lease, stranding and failure marks and pending elements. A lane
// left dirty that no message and no sweep takes (adversary seed 866) is
// traced from here: whether the sweep's index lists it, and whether its
// lease had run out. Times are from the run's start. It reads minidyn
// directly (lane items all live in shard 0), billing nothing.
func (s *sim) laneItems(dirty map[laneKey]int) []string {
	want := map[string]bool{}
	for lk := range dirty {
		want[propID(int(lk.prop))+"#"+kindNames[lk.kind]] = true
	}
	table, filter := "state", "sk = :sk"
	s.db.mu.Lock()
	scan, err := s.db.c.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table, FilterExpression: &filter,
		ExpressionAttributeValues: map[string]types.AttributeValue{":sk": &types.AttributeValueMemberS{Value: lane.SortKey}}})
	s.db.mu.Unlock()
	if err != nil {
		return []string{fmt.Sprintf("lane items: scan failed: %v", err)}
	}
	var out []string
	seen := map[string]bool{}
	for _, item := range scan.Items {
		pk := attrString(item["pk"])
		seen[pk] = true
		if line := s.laneItem(pk, item, want[pk]); line != "" {
			out = append(out, line)
		}
	}
	for pk := range want {
		if !seen[pk] {
			out = append(out, fmt.Sprintf("lane item %s (OTA behind: true): none in the store", pk))
		}
	}
	sort.Strings(out)
	return out
}

// laneItem is one item's line, or "" if none of its lanes is of interest.
func (s *sim) laneItem(pk string, item map[string]types.AttributeValue, behind bool) string {
	var lanes []string
	for name, v := range item {
		suffix, ok := strings.CutPrefix(name, "d:")
		if !ok {
			continue
		}
		set, _ := v.(*types.AttributeValueMemberSS)
		if set == nil && !behind {
			continue
		}
		lanes = append(lanes, s.laneLine(suffix, item, set))
	}
	if behind {
		for name := range item {
			if suffix, ok := strings.CutPrefix(name, "o:"); ok && item["d:"+suffix] == nil {
				lanes = append(lanes, s.laneLine(suffix, item, nil))
			}
		}
	}
	if len(lanes) == 0 && !behind {
		return ""
	}
	sort.Strings(lanes)
	if len(lanes) == 0 {
		lanes = []string{"no lane owned or pending"}
	}
	return fmt.Sprintf("lane item %s (OTA behind: %v; %s=%s %s=%s %s=%s): %s", pk, behind,
		lane.SweepAttribute, attrString(item[lane.SweepAttribute]), lane.SweepAtAttribute, s.atOf(item[lane.SweepAtAttribute]),
		"sweep_n", attrString(item["sweep_n"]), strings.Join(lanes, "; "))
}

// laneLine is one lane's attributes; set is its pending elements.
func (s *sim) laneLine(suffix string, item map[string]types.AttributeValue, set *types.AttributeValueMemberSS) string {
	var els []string
	if set != nil {
		els = set.Value
		sort.Strings(els)
	}
	shown := els
	if len(shown) > 4 {
		shown = append(shown[:4:4], fmt.Sprintf("… %d more", len(els)-4))
	}
	return fmt.Sprintf("%s: o=%s l=%s w=%s f=%s v=%s x=%s, %d pending [%s]", suffix,
		attrString(item["o:"+suffix]), s.atOf(item["l:"+suffix]), s.atOf(item["w:"+suffix]),
		attrString(item["f:"+suffix]), attrString(item["v:"+suffix]), attrString(item["x:"+suffix]),
		len(els), strings.Join(shown, " "))
}

// atOf renders a Unix µs attribute as the time since the run's start.
func (s *sim) atOf(v types.AttributeValue) string {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return attrString(v)
	}
	us, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return n.Value
	}
	return time.UnixMicro(us).Sub(s.start).Round(time.Millisecond).String()
}

func attrString(v types.AttributeValue) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberBOOL:
		return strconv.FormatBool(v.Value)
	default:
		return fmt.Sprintf("%T", v)
	}
}
