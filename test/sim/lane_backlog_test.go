package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// stateWrites counts the writes to the ARI state table (state and lanes).
type stateWrites struct {
	*DB
	n atomic.Int64
}

func (c *stateWrites) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.n.Add(1)
	return c.DB.UpdateItem(ctx, in, o...)
}

// 10,000 changes to one property and kind (two connections) while the
// bucket is booked 10 minutes ahead, as a full PMS resync during a long
// wait: every change is marked, the lane item stays far below DynamoDB's
// 400 KB, and the lanes' pushes at their slots carry the newest value of
// every date. The changes come in batches of 100, as the changes queue
// hands them to the function; time is a manual clock, and the lane jobs
// SQS would hand back after 10 minutes are delivered when it says so.
// The store is the in-memory DynamoDB, which sizes items as DynamoDB
// does and refuses one over 400 KB.
func TestLaneStaysBoundedUnderABacklog(t *testing.T) {
	lim := limiter.PerSecond(5, 5)
	ota := startOTA(t, mockota.Config{Limit: lim})
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{
  "channels": {"booking_com": {
    "base_url": %q, "allow_http": true,
    "endpoints": {
      "availability": {"path": "/v1/availability", "limit": {"rate": 5, "burst": 5}},
      "rates": {"path": "/v1/rates", "limit": {"rate": 5, "burst": 5}}
    },
    "credentials": {"cred-1": {"token_env": "T"}}
  }},
  "properties": {"hotel-aurora": [
    {"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1"},
    {"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-2"}]}
}`, ota.URL())))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clock := newClock()
	store := memStore(t)
	calls := &stateWrites{DB: store}
	sent := &sentMessages{}
	sy := &syncer.Syncer{Config: cfg, State: &ari.Store{DB: calls, Table: "state"}, Lanes: &lane.Store{DB: calls, Table: "state", Now: clock.Now},
		Token: func(string) string { return "tok" }, Linger: -1, Now: clock.Now}
	lm, err := limiter.New(store, limiter.WithTable("limits"), limiter.WithClock(clock.Now), limiter.WithCircuitBreaker(3, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	push, err := otapush.New(nil, lm, otapush.DefaultPolicy, otapush.WithClock(clock.Now), otapush.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	policy := dispatch.DefaultPolicy
	policy.BlockThreshold = 2 * time.Second
	d := &dispatch.Dispatcher{Limiter: lm, Pusher: push, Policy: policy, Now: clock.Now, Log: quiet, Fence: lm.FirstAfter,
		Leases: dispatch.NewLeases(limiter.NewLeaseGate(lm)),
		Queue:  &queue.Queue{SQS: sent, DeferredURL: deferredURL, DeadURL: deadURL, Now: clock.Now}}
	if err := handTo(sy, d); err != nil {
		t.Fatal(err)
	}
	if err := lm.Penalize(ctx, limiter.Bucket{Key: "booking_com#cred-1#rates", Limit: lim}, clock.Now().Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}

	src := newPMSOracle("hotel-aurora")
	rng := rand.New(rand.NewPCG(17, 17))
	rooms := []string{"DBL", "TWN", "SGL", "STE"}
	for i := range 10_000 {
		from := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, rng.IntN(60))
		src.change("rates", rooms[rng.IntN(len(rooms))], from.Format(ari.DateLayout), from.AddDate(0, 0, rng.IntN(5)).Format(ari.DateLayout), i)
	}
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
	item := memLaneItem(t, store, "hotel-aurora#rates")
	size := itemSize(item)
	pending := 0
	for name, v := range item {
		if set, ok := v.(*types.AttributeValueMemberSS); ok && strings.HasPrefix(name, "d:") {
			pending += len(set.Value)
		}
	}
	t.Logf("10,000 changes marked with %d state and lane writes; the lane item holds %d pending elements in %d bytes",
		calls.n.Load(), pending, size)
	if size > 40_000 {
		t.Errorf("the lane item is %d bytes after the backlog, want at most 40 KB (DynamoDB refuses 400 KB)", size)
	}

	// Ten minutes later SQS hands the lanes' jobs back, at their slots.
	bodies := sent.take(deferredURL)
	if len(bodies) != 2 {
		t.Fatalf("%d lane jobs deferred, want 2 (one per lane)", len(bodies))
	}
	var due time.Time
	var msgs []syncer.Message
	for i, body := range bodies {
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
	src.assertNewest(t, ota, "BK-1")
	src.assertNewest(t, ota, "BK-2")
	for name, v := range memLaneItem(t, store, "hotel-aurora#rates") {
		if strings.HasPrefix(name, "d:") || strings.HasPrefix(name, "o:") {
			t.Errorf("the lane still holds %s (%T) after its pushes: want it released with nothing pending", name, v)
		}
	}
	if dead := sent.take(deadURL); len(dead) != 0 {
		t.Errorf("%d messages dead-lettered, want none", len(dead))
	}
	t.Logf("%d pushes reached the OTA, %d 429s", len(ota.Accepted()), ota.Count429())
}

// memLaneItem reads the lanes item of a property and kind from the state
// table.
func memLaneItem(t *testing.T, db *DB, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: new("state"), ConsistentRead: new(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "lanes"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}
