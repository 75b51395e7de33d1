package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// countedLanes counts the lane store's writes (dynamotest.Counter).
type countedLanes struct {
	lane.DynamoDBAPI
	writes *dynamotest.Counter
}

func (c countedLanes) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return c.writes.UpdateItem(ctx, in, o...)
}

// countLanes makes sy's lane store count its writes in w.
func countLanes(sy *syncer.Syncer, w *dynamotest.Counter) {
	db := sy.Lanes.DB
	w.DB = db
	sy.Lanes.DB = countedLanes{DynamoDBAPI: db, writes: w}
}

// pushesPerLane counts the OTA's accepted pushes per hotel ref.
func pushesPerLane(r *laneRig) map[string]int {
	out := map[string]int{}
	for _, req := range r.ota.Accepted() {
		// A lane job's id is the lane (…#hotel ref) @ its owner token.
		name, _, _ := strings.Cut(req.JobID, "@")
		out[name[strings.LastIndex(name, "#")+1:]]++
	}
	return out
}

// auroraLanes reads the lane item of hotel-aurora's rates.
func auroraLanes(t *testing.T, r *laneRig) map[string]types.AttributeValue {
	t.Helper()
	out, err := emulator.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &r.stateTable, ConsistentRead: new(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "hotel-aurora#rates"}, "sk": &types.AttributeValueMemberS{Value: lane.SortKey}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// assertReleased fails unless no lane of the item is owned or has
// anything pending.
func assertReleased(t *testing.T, r *laneRig) {
	t.Helper()
	for name := range auroraLanes(t, r) {
		if strings.HasPrefix(name, "o:") || strings.HasPrefix(name, "d:") {
			t.Errorf("lane item still holds %s: want every lane released with nothing pending", name)
		}
	}
}

// countedReads counts the ARI store's reads (BatchGetItem).
type countedReads struct {
	ari.DynamoDBAPI
	n *atomic.Int64
}

func (c countedReads) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.n.Add(1)
	return c.DynamoDBAPI.BatchGetItem(ctx, in, o...)
}

// oneChange sends one change to hotel-aurora's rates, which fan out to
// lanes lanes, through one invocation, and checks that every lane pushed
// it once and ended released. It returns the lane writes the store
// answered and the ARI reads.
func oneChange(t *testing.T, lanes int) (writes, reads int64) {
	t.Helper()
	lim := limiter.PerSecond(20, 10)
	r := newLaneRig(t, lim, mockota.Config{Limit: limiter.PerSecond(100, 50)}, connconfig.Credentials(lim, lanes))
	r.linger = -1
	sy := r.worker()
	var w dynamotest.Counter
	countLanes(sy, &w)
	var n atomic.Int64
	sy.State.DB = countedReads{DynamoDBAPI: sy.State.DB, n: &n}
	src := newPMS("hotel-aurora")
	body := src.change("rates", "DBL", "2027-01-05", "2027-01-07", 1)

	out := sy.HandleBatch(context.Background(), []syncer.Message{{ID: "1", Body: body}})[0]
	if out.Err != nil || out.Change.Scheduled != lanes {
		t.Fatalf("change: %+v, want %d lanes scheduled", out, lanes)
	}
	pushes := pushesPerLane(r)
	for i := 1; i <= lanes; i++ {
		if ref := fmt.Sprintf("BK-%d", i); pushes[ref] != 1 {
			t.Errorf("lane %s pushed %d times, want once (pushes %v, results %+v)", ref, pushes[ref], pushes, out.Jobs)
		}
		src.assertNewest(t, otaCopy(t, r.pipeline), fmt.Sprintf("BK-%d", i))
	}
	assertReleased(t, r)
	if err := w.LastUnanswered(); err != nil {
		t.Logf("a lane write went unanswered: %v", err)
	}
	return w.Answered(), n.Load()
}

// A change's push in the invocation that marked its lanes costs no claim,
// and the lanes of its item finish with one write: one mark and one finish
// per change, however many lanes it fans out to (before: a claim and a
// finish per lane besides the mark).
func TestMarkingInvocationPushesWithoutAClaim(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		lanes int
	}{
		{"one lane", 1},
		{"three lanes", 3},
		{"five lanes", 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if writes, _ := oneChange(t, tt.lanes); writes != 2 {
				t.Errorf("%d lane writes answered for one change on %d lanes, want 2 (one mark, one finish)", writes, tt.lanes)
			}
		})
	}
}

// The first pushes of the lanes one change woke carry the same dates, and
// render them from one read of the ARI state (before: one per lane).
func TestMarkingInvocationReadsTheStateOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		lanes int
	}{
		{"one lane", 1},
		{"five lanes", 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, reads := oneChange(t, tt.lanes); reads != 1 {
				t.Errorf("%d ARI reads for one change on %d lanes, want 1", reads, tt.lanes)
			}
		})
	}
}

// FinishAll clears and releases every lane of an item with one write; if
// one lane cannot be released (a change arrived during its push, or it
// has another owner), each lane is finished on its own, so that the others
// are still released and that one keeps its owner and what is pending.
func TestOneFinishReleasesEveryLaneOfAnItem(t *testing.T) {
	t.Parallel()
	ids := make([]lane.ID, 3)
	for i := range ids {
		ids[i] = lane.ID{Property: "hotel-1", Kind: "rates", Channel: "booking_com", Credential: fmt.Sprintf("c%d", i), HotelRef: fmt.Sprintf("BK-%d", i)}
	}
	for _, tt := range []struct {
		name string
		// meanwhile happens to lane 1 between the push's read and its
		// finish.
		meanwhile    func(t *testing.T, s *lane.Store)
		wantWrites   int64
		wantReleased []bool
		wantNotOwner []bool
		// wantPending is what each lane holds once a next change marked
		// it: that change alone on a released lane.
		wantPending []int
	}{
		{"every lane done", func(*testing.T, *lane.Store) {}, 1, []bool{true, true, true}, []bool{false, false, false}, []int{1, 1, 1}},
		{"a change arrives on one lane", func(t *testing.T, s *lane.Store) {
			if _, err := s.Mark(context.Background(), ids[1:2], []lane.Element{el("TWN", 2)}, func(lane.ID) string { return "late" }); err != nil {
				t.Fatal(err)
			}
		}, 4, []bool{true, false, true}, []bool{false, false, false}, []int{1, 3, 1}},
		{"one lane has another owner", func(t *testing.T, s *lane.Store) {
			if _, err := s.Claim(context.Background(), ids[1], "m-1", "thief", nil); err != nil {
				t.Fatal(err)
			}
		}, 4, []bool{true, false, true}, []bool{false, true, false}, []int{1, 2, 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db := emulator.DynamoDB(t)
			w := &dynamotest.Counter{DB: db}
			s := &lane.Store{DB: countedLanes{DynamoDBAPI: db, writes: w}, Table: emulator.NewStateTable(t, db)}
			marks, err := s.Mark(ctx, ids, []lane.Element{el("DBL", 1)}, func(id lane.ID) string { return "m-" + id.HotelRef[3:] })
			if err != nil {
				t.Fatal(err)
			}
			done := make([]lane.Done, len(marks))
			for i, m := range marks {
				done[i] = lane.Done{Lane: m.Lane, Owner: m.Pending.Owner, Elements: m.Pending.Elements}
			}
			tt.meanwhile(t, s)
			before := w.Answered()
			got := s.FinishAll(ctx, done)
			if n := w.Answered() - before; n != tt.wantWrites {
				t.Errorf("finishing %d lanes took %d writes, want %d", len(ids), n, tt.wantWrites)
			}
			for i, f := range got {
				var other *lane.NotOwnerError
				if f.Released != tt.wantReleased[i] || errors.As(f.Err, &other) != tt.wantNotOwner[i] || (f.Err != nil && other == nil) {
					t.Errorf("lane %d: released %v, err %v; want released %v, not owner %v", i, f.Released, f.Err, tt.wantReleased[i], tt.wantNotOwner[i])
				}
			}
			// What the item holds: released lanes hold nothing, the others
			// their owner and everything pending.
			marks, err = s.Mark(ctx, ids, []lane.Element{el("STE", 9)}, func(lane.ID) string { return "next" })
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range marks {
				if m.Claimed != tt.wantReleased[i] || len(m.Pending.Elements) != tt.wantPending[i] {
					t.Errorf("lane %d after the finish: claimed by the next mark %v with %d pending, want %v with %d",
						i, m.Claimed, len(m.Pending.Elements), tt.wantReleased[i], tt.wantPending[i])
				}
			}
		})
	}
}
