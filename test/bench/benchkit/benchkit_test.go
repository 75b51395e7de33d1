package benchkit

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

func TestItemBytesFollowsDynamoDBsRules(t *testing.T) {
	item := map[string]types.AttributeValue{
		"pk":  &types.AttributeValueMemberS{Value: "bench#sdk"},                                                                     // 2 + 9
		"tat": &types.AttributeValueMemberN{Value: "1795953600123456"},                                                              // 3 + 16 digits → 9
		"ttl": &types.AttributeValueMemberN{Value: "1700000000"},                                                                    // 3 + "17" → 2
		"ok":  &types.AttributeValueMemberBOOL{Value: true},                                                                         // 2 + 1
		"m":   &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": &types.AttributeValueMemberS{Value: "xy"}}}, // 1 + 3 + 3
	}
	if got, want := ItemBytes(item), 11+12+5+3+7; got != want {
		t.Errorf("ItemBytes = %d, want %d", got, want)
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
