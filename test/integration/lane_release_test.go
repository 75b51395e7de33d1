package integration

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// beforeRelease is a real lane-store client that runs meanwhile once,
// just before the first Release (a REMOVE of the owner, conditional on
// nothing pending) reaches DynamoDB: the moment between a claim that found
// nothing and the release that follows it.
type beforeRelease struct {
	lane.DynamoDBAPI
	once      sync.Once
	meanwhile func()
}

func (b *beforeRelease) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if strings.HasPrefix(aws.ToString(in.UpdateExpression), "REMOVE ") && strings.Contains(aws.ToString(in.ConditionExpression), "attribute_not_exists") {
		b.once.Do(b.meanwhile)
	}
	return b.DynamoDBAPI.UpdateItem(ctx, in, o...)
}

// A lane job whose claim clears the last of what was pending releases the
// lane; a change that lands between that claim and the release finds the
// lane owned and schedules nothing, so the release must see it and push
// it. The state (a job whose previous push carried everything pending) is
// built with the lane store's own calls; the change lands through another
// worker's HandleBatch at the deterministic moment.
func TestChangeDuringReleaseIsPushed(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(10, 5)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim}, oneHotelConfig(lim, ""))
	r.linger = -1
	ctx := context.Background()
	src := newPMS("hotel-aurora")
	first := src.change("rates", "DBL", "2027-01-05", "2027-01-06", 100)
	during := src.change("rates", "DBL", "2027-01-06", "2027-01-08", 200)

	id := lane.ID{Property: "hotel-aurora", Kind: "rates", Channel: "booking_com", Credential: "cred-1", HotelRef: "BK-1001"}
	a, b := r.worker(), r.worker()
	c1, err := ari.Parse(first, 31)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.State.Apply(ctx, c1); err != nil {
		t.Fatal(err)
	}
	e1 := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: c1.From, To: c1.To, Sequence: c1.Sequence}
	if _, err := a.Lanes.Mark(ctx, []lane.ID{id}, []lane.Element{e1}, func(lane.ID) string { return "t1" }); err != nil {
		t.Fatal(err)
	}
	// Token t1's job comes back after a push that carried e1: its claim
	// clears e1 and finds nothing else.
	payload, _ := json.Marshal(map[string]any{"property_id": id.Property, "hotel_ref": id.HotelRef, "token": "t1", "pushed": []string{e1.String()}})
	body, err := job.Encode(job.Job{ID: id.String() + "@t1", Channel: id.Channel, Credential: id.Credential, Endpoint: id.Kind, Payload: payload, FirstSeen: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	landed := false
	a.Lanes.DB = &beforeRelease{DynamoDBAPI: a.Lanes.DB, meanwhile: func() {
		out := b.HandleBatch(ctx, []syncer.Message{{ID: "during", Body: during}})[0]
		if out.Err != nil || out.Change.Lanes != 1 || out.Change.Scheduled != 0 {
			t.Errorf("the change during the release: %+v, want its lane marked and nothing scheduled (the lane is owned)", out)
		}
		landed = true
	}}

	out := a.HandleBatch(ctx, []syncer.Message{{ID: "job", Body: body, Deferred: true}})[0]
	if out.Err != nil || !landed {
		t.Fatalf("the lane job: %+v (change landed: %v)", out, landed)
	}
	r.run(1, time.Minute, 30*time.Second)

	ota := otaCopy(t, r.pipeline)
	for _, date := range []string{"2027-01-06", "2027-01-07", "2027-01-08"} {
		if h, ok := ota.Held(otacopy.Day{HotelRef: "BK-1001", Kind: "rates", RoomType: "DBL", RatePlan: "BAR", Date: date}); !ok || h.Sequence != 2 {
			t.Errorf("%s at the OTA: %+v (held %v), want the change that landed during the release (sequence 2); the lane job ended %s (%s)", date, h, ok, out.Jobs[0].Outcome, out.Jobs[0].Reason)
		}
	}
	item := laneItem(t, r, id.Property+"#"+id.Kind)
	for name := range item {
		if strings.HasSuffix(name, "BK-1001") && (strings.HasPrefix(name, "d:") || strings.HasPrefix(name, "o:")) {
			t.Errorf("the lane still holds %s = %v after its push: want it released with nothing pending", name, item[name])
		}
	}
	for _, res := range out.Jobs {
		if res.Outcome == dispatch.DeadLettered {
			t.Errorf("lane job dead-lettered: %+v", res)
		}
	}
}
