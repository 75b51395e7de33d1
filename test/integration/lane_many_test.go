package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	sdkpipeline "github.com/fleetbucket/fleetbucket/sdk/pipeline"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// expressionLimit is the emulator's client refusing, as DynamoDB does and
// moto does not, a request with an expression string over 4 KB (its
// length as written): a ValidationException, nothing written.
type expressionLimit struct {
	*dynamodb.Client
	refused atomic.Int64
}

func (c *expressionLimit) check(exprs ...*string) error {
	for _, e := range exprs {
		if n := len(aws.ToString(e)); n > 4096 {
			c.refused.Add(1)
			return &smithy.GenericAPIError{Code: "ValidationException",
				Message: fmt.Sprintf("Invalid expression: Expression size has exceeded the maximum allowed size; expression size: %d", n)}
		}
	}
	return nil
}

func (c *expressionLimit) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := c.check(in.UpdateExpression, in.ConditionExpression); err != nil {
		return nil, err
	}
	return c.Client.UpdateItem(ctx, in, o...)
}

func (c *expressionLimit) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := c.check(in.ProjectionExpression); err != nil {
		return nil, err
	}
	return c.Client.GetItem(ctx, in, o...)
}

func (c *expressionLimit) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if err := c.check(in.KeyConditionExpression, in.FilterExpression, in.ProjectionExpression); err != nil {
		return nil, err
	}
	return c.Client.Query(ctx, in, o...)
}

func (c *expressionLimit) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		var err error
		switch {
		case it.Update != nil:
			err = c.check(it.Update.UpdateExpression, it.Update.ConditionExpression)
		case it.Put != nil:
			err = c.check(it.Put.ConditionExpression)
		case it.Delete != nil:
			err = c.check(it.Delete.ConditionExpression)
		case it.ConditionCheck != nil:
			err = c.check(it.ConditionCheck.ConditionExpression)
		}
		if err != nil {
			return nil, err
		}
	}
	return c.Client.TransactWriteItems(ctx, in, o...)
}

// A property with 120 connections of one kind (DynamoDB's 4 KB limit on
// an expression held about 48 lanes' marks in one write): a change marks
// every lane, each lane's push carries it, every lane is finished and
// released, and nothing is dead-lettered, with every request under the
// limit.
func TestPropertyWithManyConnectionsIsMarked(t *testing.T) {
	const n = 120
	lim := limiter.PerSecond(500, 500)
	var conns []string
	for i := range n {
		conns = append(conns, fmt.Sprintf(`{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-%d"}`, i))
	}
	r := newLaneRig(t, lim, mockota.Config{Limit: lim}, bookingConfig(lim, "", `"hotel-aurora": [`+strings.Join(conns, ",\n")+`]`))
	ctx := context.Background()
	db := &expressionLimit{Client: emulator.DynamoDB(t)}
	sy := &syncer.Syncer{Config: r.cfg, State: &ari.Store{DB: db, Table: r.stateTable}, Lanes: &lane.Store{DB: db, Table: r.stateTable},
		Token: func(string) string { return "tok" }, Linger: -1}
	d := r.dispatcher(workerOpts{db: db})
	if err := sdkpipeline.Wire(sy, d); err != nil {
		t.Fatal(err)
	}

	src := newPMS("hotel-aurora")
	src.change("rates", "DBL", "2027-03-01", "2027-03-03", 1)
	src.change("rates", "TWN", "2027-03-02", "2027-03-02", 2)
	var msgs []syncer.Message
	for i, body := range src.bodies {
		msgs = append(msgs, syncer.Message{ID: fmt.Sprint(i), Body: body})
	}
	pushed := 0
	for _, out := range sy.HandleBatch(ctx, msgs) {
		if out.Err != nil || out.Change.Invalid != "" || out.Change.Lanes != n {
			t.Fatalf("change %s: %+v, %v; want its %d lanes marked", out.ID, out.Change, out.Err, n)
		}
		for _, res := range out.Jobs {
			if res.Outcome != dispatch.Pushed {
				t.Errorf("change %s: lane job %s %s (%s), want it pushed", out.ID, res.JobID, res.Outcome, res.Reason)
			}
			pushed++
		}
	}
	if pushed != n {
		t.Errorf("%d lane jobs pushed, want %d (one per lane, both changes in it)", pushed, n)
	}
	if got := db.refused.Load(); got != 0 {
		t.Errorf("%d requests over DynamoDB's 4 KB expression limit", got)
	}
	if dl := r.deadLetters(); len(dl) != 0 {
		t.Errorf("%d dead letters, want none; the first: %+v", len(dl), dl[0])
	}

	// Every lane was marked (its version counts the mark) and finished:
	// nothing pending, no owner.
	out, err := emulator.DynamoDB(t).GetItem(ctx, &dynamodb.GetItemInput{TableName: &r.stateTable, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "hotel-aurora#rates"}, "sk": &types.AttributeValueMemberS{Value: "lanes"}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		suffix := fmt.Sprintf("booking_com#cred-1#BK-%d", i)
		if _, ok := out.Item["v:"+suffix]; !ok {
			t.Errorf("lane %s was never marked", suffix)
		}
		for _, a := range []string{"d:", "o:", "l:"} {
			if v, ok := out.Item[a+suffix]; ok {
				t.Errorf("lane %s still holds %s%v, want it finished and released", suffix, a, v)
			}
		}
	}
	ota, err := otacopy.Build(r.ota.Accepted())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		src.assertNewest(t, ota, fmt.Sprintf("BK-%d", i))
	}
}
