package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	sdkpipeline "github.com/fleetbucket/fleetbucket/sdk/pipeline"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// deferredBodies is the real SQS client of a worker that also keeps the
// bodies it defers, so that a test can deliver a job at its due time on
// a manual clock rather than wait for SQS's real delay.
type deferredBodies struct {
	queue.SQSAPI
	url    string
	mu     sync.Mutex
	bodies []string
}

func (c *deferredBodies) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if aws.ToString(in.QueueUrl) == c.url {
		c.mu.Lock()
		c.bodies = append(c.bodies, aws.ToString(in.MessageBody))
		c.mu.Unlock()
	}
	return c.SQSAPI.SendMessage(ctx, in, o...)
}

// stateCalls counts the writes to the ARI state table (state and lanes).
type stateCalls struct {
	*dynamodb.Client
	writes atomic.Int64
}

func (c *stateCalls) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.writes.Add(1)
	return c.Client.UpdateItem(ctx, in, o...)
}

// itemBytes is an item's size as DynamoDB counts it, near enough: each
// attribute's name and value.
func itemBytes(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)
		case *types.AttributeValueMemberSS:
			for _, s := range v.Value {
				n += len(s)
			}
		default:
			n++
		}
	}
	return n
}

// 10,000 changes to one property and kind (two connections) while the
// bucket is booked 10 minutes ahead, as a full PMS resync during a long
// wait: every change is marked, the lane item stays far below DynamoDB's
// 400 KB, and the lanes' pushes at their slots carry the newest value of
// every date. The changes come in batches of 100, as the changes queue
// hands them to the function; time is a manual clock, and the lane jobs
// SQS would hand back after 10 minutes are delivered when it says so.
func TestLaneStaysBoundedUnderABacklog(t *testing.T) {
	lim := limiter.PerSecond(5, 5)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim}, bookingConfig(lim, "", `"hotel-aurora": [
    {"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1"},
    {"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-2"}]`))
	ctx := context.Background()
	clock := newManualClock()
	deferred := &deferredBodies{SQSAPI: emulator.SQS(t), url: r.deferredURL}
	db := emulator.DynamoDB(t)
	calls := &stateCalls{Client: db}
	sy := &syncer.Syncer{Config: r.cfg, State: &ari.Store{DB: calls, Table: r.stateTable}, Lanes: &lane.Store{DB: calls, Table: r.stateTable, Now: clock.Now},
		Token: func(string) string { return "tok" }, Linger: -1, Now: clock.Now}
	policy := dispatch.DefaultPolicy
	policy.BlockThreshold = 2 * time.Second
	d := r.dispatcher(workerOpts{db: db, sqs: deferred, now: clock.Now, policy: policy})
	if err := sdkpipeline.Wire(sy, d); err != nil {
		t.Fatal(err)
	}
	lm, err := limiter.New(emulator.DynamoDB(t), limiter.WithTable(r.table), limiter.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	if err := lm.Penalize(ctx, limiter.Bucket{Key: "booking_com#cred-1#rates", Limit: lim}, clock.Now().Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}

	src := newPMS("hotel-aurora")
	rng := rand.New(rand.NewPCG(17, 17))
	rooms := []string{"DBL", "TWN", "SGL", "STE"}
	for i := range 10_000 {
		from := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, rng.IntN(60))
		src.change("rates", rooms[rng.IntN(len(rooms))], from.Format(ari.DateLayout), from.AddDate(0, 0, rng.IntN(5)).Format(ari.DateLayout), i)
	}
	start := time.Now()
	for b := 0; b < len(src.bodies); b += syncer.ChangesBatchSize {
		var msgs []syncer.Message
		for i, body := range src.bodies[b:min(b+syncer.ChangesBatchSize, len(src.bodies))] {
			msgs = append(msgs, syncer.Message{ID: fmt.Sprint(b + i), Body: body})
		}
		for _, out := range sy.HandleBatch(ctx, msgs) {
			// A change whose dates all went to a newer change of the same
			// batch (applied concurrently) has nothing to mark.
			if out.Err != nil || out.Change.Invalid != "" || (out.Change.Applied > 0 && out.Change.Lanes != 2) {
				t.Fatalf("change %s of the backlog: %+v, %v; want its 2 lanes marked", out.ID, out.Change, out.Err)
			}
			for _, res := range out.Jobs {
				if res.Outcome != dispatch.Deferred {
					t.Fatalf("change %s: lane job %s %s (%s), want it deferred to its slot 10 min ahead", out.ID, res.JobID, res.Outcome, res.Reason)
				}
			}
		}
	}
	marked := time.Since(start)
	item := laneItem(t, r, "hotel-aurora#rates")
	size := itemBytes(item)
	pending := 0
	for name, v := range item {
		if set, ok := v.(*types.AttributeValueMemberSS); ok && strings.HasPrefix(name, "d:") {
			pending += len(set.Value)
		}
	}
	t.Logf("10,000 changes marked in %v with %d state and lane writes; the lane item holds %d pending elements in %d bytes",
		marked.Round(time.Second), calls.writes.Load(), pending, size)
	if size > 40_000 {
		t.Errorf("the lane item is %d bytes after the backlog, want at most 40 KB (DynamoDB refuses 400 KB)", size)
	}

	// Ten minutes later SQS hands the lanes' jobs back, at their slots.
	if len(deferred.bodies) != 2 {
		t.Fatalf("%d lane jobs deferred, want 2 (one per lane)", len(deferred.bodies))
	}
	var due time.Time
	var msgs []syncer.Message
	for i, body := range deferred.bodies {
		j, err := job.Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		if j.Hold.At.After(due) {
			due = j.Hold.At
		}
		msgs = append(msgs, syncer.Message{ID: fmt.Sprint(i), Body: body, Deferred: true})
	}
	clock.Set(due)
	for _, out := range sy.HandleBatch(ctx, msgs) {
		if out.Err != nil {
			t.Fatalf("lane job at its slot: %v", out.Err)
		}
		for _, res := range out.Jobs {
			t.Logf("lane job %s: %s, %d pushes, %d items (%s)", res.JobID, res.Outcome, res.Pushes, res.Items, res.Reason)
		}
	}
	ota := otaCopy(t, r.pipeline)
	src.assertNewest(t, ota, "BK-1")
	src.assertNewest(t, ota, "BK-2")
	for name, v := range laneItem(t, r, "hotel-aurora#rates") {
		if strings.HasPrefix(name, "d:") || strings.HasPrefix(name, "o:") {
			t.Errorf("the lane still holds %s (%T) after its pushes: want it released with nothing pending", name, v)
		}
	}
	t.Logf("%d pushes reached the OTA, %d 429s", len(r.ota.Accepted()), r.ota.Count429())
}

// A compaction that lands while the owner's push is in flight makes the
// push's Finish refuse (the merged element may carry what the push never
// read), and the owner's next claim finds it; a compaction of a lane that
// changed since it was read changes nothing.
func TestLaneCompactionDuringAPushKeepsItPending(t *testing.T) {
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
