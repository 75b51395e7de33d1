package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A compaction that lands while the owner's push is in flight makes the
// push's Finish refuse (the merged element may carry what the push never
// read), and the owner's next claim finds it; a compaction of a lane that
// changed since it was read changes nothing.
func TestLaneCompactionDuringAPushKeepsItPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newLaneStore(t, nil)
	id := lane.ID{Property: "hotel-1", Kind: "rates", Channel: "bk", Credential: "c1", HotelRef: "BK-1"}
	e1 := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-10", To: "2027-01-11", Sequence: 1}
	e2 := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-11", To: "2027-01-12", Sequence: 2}
	if _, err := s.Mark(ctx, []lane.ID{id}, []lane.Element{e1}, func(lane.ID) string { return "t1" }); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, id, "t1", "t2", nil) // the push of e1 begins
	if err != nil {
		t.Fatal(err)
	}
	marks, err := s.Mark(ctx, []lane.ID{id}, []lane.Element{e2}, func(lane.ID) string { return "t9" })
	if err != nil {
		t.Fatal(err)
	}
	seen := marks[0].Pending
	if _, err := s.Mark(ctx, []lane.ID{id}, []lane.Element{e2}, func(lane.ID) string { return "t9" }); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Compact(ctx, id, seen, lane.Coalesce(seen.Elements, 31)); ok || err != nil {
		t.Fatalf("compaction of a lane marked since it was read = %v, %v; want nothing done", ok, err)
	}
	marks, err = s.Mark(ctx, []lane.ID{id}, []lane.Element{e2}, func(lane.ID) string { return "t9" })
	if err != nil {
		t.Fatal(err)
	}
	merged := lane.Coalesce(marks[0].Pending.Elements, 31)
	if ok, err := s.Compact(ctx, id, marks[0].Pending, merged); !ok || err != nil {
		t.Fatalf("compaction = %v, %v; want it done", ok, err)
	}
	// The push of e1 ends: e1 is gone from the set (merged away), and its
	// size is 1 again, but the lane must not be released.
	if released, _, err := s.Finish(ctx, id, "t2", claimed.Elements); released || err != nil {
		t.Fatalf("finish after a compaction = %v, %v; want it refused", released, err)
	}
	next, err := s.Claim(ctx, id, "t2", "t3", claimed.Elements)
	if err != nil || fmt.Sprint(next.Elements) != fmt.Sprint(merged) {
		t.Fatalf("the next claim = %+v, %v; want the merged %v", next, err, merged)
	}
	if released, _, err := s.Finish(ctx, id, "t3", next.Elements); !released || err != nil {
		t.Fatalf("finish of the merged push = %v, %v; want the lane released", released, err)
	}
}

// oversizedLanes is a real lane-store client whose marks DynamoDB refuses
// as over its item size limit.
type oversizedLanes struct{ lane.DynamoDBAPI }

func (o oversizedLanes) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if strings.HasPrefix(aws.ToString(in.UpdateExpression), "ADD ") {
		return nil, &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size to update has exceeded the maximum allowed size"}
	}
	return o.DynamoDBAPI.UpdateItem(ctx, in, opts...)
}

// A mark that DynamoDB refuses as too large is a rejection, not a store
// failure to retry until SQS dead-letters the change with no reason: the
// change goes to the dead-letter queue at once, saying why.
func TestOversizedLaneWriteIsDeadLetteredWithTheReason(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(10, 5)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim}, oneHotelConfig(lim, ""))
	sy := r.worker()
	sy.Lanes.DB = oversizedLanes{sy.Lanes.DB}
	body := newPMS("hotel-aurora").change("rates", "DBL", "2027-01-05", "2027-01-06", 1)
	rep, err := sy.HandleChange(context.Background(), body)
	if err != nil || !strings.Contains(rep.Invalid, "maximum allowed size") {
		t.Fatalf("an oversized mark: %+v, %v; want the change dead-lettered with the reason", rep, err)
	}
	if reason := r.receiveDLQ()[body]; !strings.Contains(reason, "marking its lanes failed") {
		t.Fatalf("the dead letter's reason is %q", reason)
	}
}
