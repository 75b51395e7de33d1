package benchkit

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

func TestItemBytesFollowsDynamoDBsRules(t *testing.T) {
	S := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	N := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	for _, tt := range []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"a limiter item", map[string]types.AttributeValue{
			"pk":  S("bench#sdk"),                               // 2 + 9
			"tat": N("1795953600123456"),                        // 3 + 16 digits → 9
			"ttl": N("1700000000"),                              // 3 + "17" → 2
			"ok":  &types.AttributeValueMemberBOOL{Value: true}, // 2 + 1
		}, 11 + 12 + 5 + 3},
		{"zero", map[string]types.AttributeValue{"a": N("0")}, 1 + 1},
		{"leading zeros, sign and point", map[string]types.AttributeValue{"a": N("-0.0012")}, 1 + 2},
		{"an exponent places the digits", map[string]types.AttributeValue{"a": N("1.5E+30")}, 1 + 2},
		// Each element of a map or list costs a byte besides itself.
		{"a map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"a": S("xy"), "bc": N("7")}}}, 1 + 3 + (1 + 1 + 2) + (1 + 2 + 2)},
		{"an empty map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{}}, 1 + 3},
		{"a list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			S("ab"), &types.AttributeValueMemberNULL{Value: true}}}}, 1 + 3 + (1 + 2) + (1 + 1)},
		{"a map in a list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": S("v")}}}}}, 1 + 3 + (1 + 3 + (1 + 1 + 1))},
		{"sets", map[string]types.AttributeValue{
			"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bcd"}},  // 2 + 4
			"ns": &types.AttributeValueMemberNS{Value: []string{"12", "300"}}, // 2 + 2 + 2
			"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1, 2}, {3}}}, // 2 + 3
		}, 6 + 6 + 5},
	} {
		if got := ItemBytes(tt.item); got != tt.want {
			t.Errorf("%s: ItemBytes = %d, want %d", tt.name, got, tt.want)
		}
	}
	if units(0, 1024) != 1 || units(1024, 1024) != 1 || units(1025, 1024) != 2 {
		t.Error("units must round up, at least 1")
	}
}

func TestOverBoundFindsTheFullestWindow(t *testing.T) {
	l := limiter.PerSecond(10, 2)
	t0 := time.Unix(1000, 0)
	r := FleetResult{Grants: []time.Time{t0, t0, t0, t0.Add(time.Second)}}
	// Three at one instant against a burst of 2.
	if got := r.OverBound(l); got != 1.5 {
		t.Errorf("OverBound = %v, want 1.5", got)
	}
	r.Elapsed = time.Second
	if got := r.Allowed(l); got != 12 {
		t.Errorf("Allowed = %v, want 12", got)
	}
}
