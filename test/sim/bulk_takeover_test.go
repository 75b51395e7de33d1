package sim

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// afterBulkRead is the store as a bulk push sees it: once armed, the first
// read of ARI state after a claim by a bulk job (a claim from a bulk
// owner token, "b-…") runs live after the read is answered, so that the
// bulk push holds what it read while a live change lands on its lane.
type afterBulkRead struct {
	*DB
	armed   atomic.Bool
	claimed atomic.Bool
	live    func()
}

func (a *afterBulkRead) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := a.DB.UpdateItem(ctx, in, opts...)
	if t, ok := in.ExpressionAttributeValues[":t"].(*types.AttributeValueMemberS); ok && err == nil && a.armed.Load() &&
		strings.HasPrefix(t.Value, "b-") && in.ExpressionAttributeValues[":next"] != nil {
		a.claimed.Store(true)
	}
	return out, err
}

func (a *afterBulkRead) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := a.DB.BatchGetItem(ctx, in, opts...)
	if err == nil && a.claimed.Load() && a.armed.CompareAndSwap(true, false) {
		a.live()
	}
	return out, err
}

// A bulk push that has claimed its lane and read the state it sends must
// not be overtaken by a live change: a live push of newer state that went
// out first would be overwritten at the OTA by the bulk push's older read
// ("went back": onboarding replays, seq 26 over 62). The live change lands
// between the bulk push's read and its send; every date must arrive at the
// OTA in sequence order, and end at the newest.
func TestLiveChangeNeverGoesOutBeforeABulkPushAlreadyRead(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim}, connconfig.Booking(lim, "", auroraBK1001), nil)
	hook := &afterBulkRead{DB: m.store}
	m.sy.Lanes = &lane.Store{DB: hook, Table: "state", Now: m.clock.Now}
	m.sy.State = &ari.Store{DB: hook, Table: "state"}
	src := newPMSOracle("hotel-aurora")

	// The hotel's history, delivered; then a resync of it.
	m.changes([]string{src.change("rates", "DBL", "2027-02-01", "2027-02-05", 100)}, 10)
	m.drain(100)
	m.clock.Set(m.clock.Now().Add(time.Minute))
	newer := src.change("rates", "DBL", "2027-02-03", "2027-02-03", 200)
	hook.live = func() {
		// In the bulk push's store call, as another worker would: its
		// own invocation, its own pushes.
		for _, out := range m.sy.HandleBatch(context.Background(), []syncer.Message{{ID: "live", Body: newer}}) {
			if out.Err != nil {
				t.Errorf("the live change: %v", out.Err)
			}
			m.results = append(m.results, out.Jobs...)
		}
	}
	hook.armed.Store(true)
	r := ari.Resync{ResyncID: "rs-1", PropertyID: "hotel-aurora", Kinds: []string{"rates"}, From: "2027-02-01", To: "2027-02-05",
		Cells: []ari.ResyncCell{{RoomType: "DBL", RatePlan: "BAR"}}}
	body, err := r.Event(m.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	m.handle([]syncer.Message{{ID: "rs-1", Body: body}})
	m.drain(100)
	if hook.armed.Load() {
		t.Fatal("no bulk push claimed and read its lane: the test did not run its case")
	}

	var accepted []mockota.Request
	for _, r := range m.ota.Accepted() {
		accepted = append(accepted, r)
		c, err := otacopy.Build(accepted)
		if err != nil {
			t.Fatal(err)
		}
		for d := range 5 {
			day := otacopy.Day{HotelRef: "BK-1001", Kind: "rates", RoomType: "DBL", RatePlan: "BAR", Date: time.Date(2027, 2, 1+d, 0, 0, 0, 0, time.UTC).Format(ari.DateLayout)}
			if h, ok := c.Held(day); ok && h.Sequence < maxReached(c, day) {
				t.Errorf("push %d (%s) went back on %s: seq %d after seq %d had arrived", len(accepted), r.JobID, day.Date, h.Sequence, maxReached(c, day))
			}
		}
	}
	src.assertNewest(t, m.ota, "BK-1001")
}

// maxReached is the newest sequence of day that ever arrived at the OTA.
func maxReached(c *otacopy.Copy, day otacopy.Day) int64 {
	var newest int64
	for seq := int64(1); seq < 10; seq++ {
		if _, ok := c.Reached(day, seq); ok {
			newest = seq
		}
	}
	return newest
}

// A live change takes a lane from the bulk job waiting for its token and,
// its push out, hands the lane to a new bulk job; the first job's token
// comes all the same. It pushes the lane with it (the new job waits for a
// token of its own), where it found the lane another's and left the token
// unused, a recheck two minutes on: in the simulated onboarding at 30
// hotels a bucket about 6 in 100 bulk grants went so, 4% of the tokens
// live traffic left (FLEETBUCKET_SIM_PUSH_TRACE, seed 1).
func TestBulkJobWhoseLaneWentLiveAndBackPushesWithItsToken(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim}, connconfig.Booking(lim, "", auroraBK1001), nil)
	src := newPMSOracle("hotel-aurora")
	m.changes([]string{src.change("rates", "DBL", "2027-02-01", "2027-02-05", 100)}, 10)
	m.drain(100)

	// The resync's bulk job waits: the bucket is silenced.
	m.clock.Set(m.clock.Now().Add(time.Minute))
	free := m.bookRates(lim, 10*time.Second)
	r := ari.Resync{ResyncID: "rs-1", PropertyID: "hotel-aurora", Kinds: []string{"rates"}, From: "2027-02-01", To: "2027-02-05",
		Cells: []ari.ResyncCell{{RoomType: "DBL", RatePlan: "BAR"}}}
	body, err := r.Event(m.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	m.handle([]syncer.Message{{ID: "rs-1", Body: body}})
	if len(m.pending) != 1 || !strings.Contains(m.pending[0].ID, "@b-") {
		t.Fatalf("deferred %v, want the resync's one bulk job", m.pending)
	}
	first := m.pending[0]
	m.pending = nil

	// A live change takes the lane and, pushed, hands it to a new bulk job.
	m.clock.Set(free)
	m.changes([]string{src.change("rates", "DBL", "2027-02-03", "2027-02-03", 200)}, 10)
	if len(m.pending) != 1 || m.pending[0].ID == first.ID || !strings.Contains(m.pending[0].ID, "@b-") {
		t.Fatalf("deferred %v after the live push, want a new bulk job", m.pending)
	}

	// The first bulk job is back, past its turn.
	m.pending = append([]job.Job{first}, m.pending...)
	m.clock.Set(m.clock.Now().Add(time.Second))
	n := len(m.results)
	m.deliverNext()
	for _, res := range m.results[n:] {
		if res.JobID == first.ID && (res.Outcome != dispatch.Pushed || res.Pushes == 0) {
			t.Errorf("the bulk job whose lane went live and back: %s (%s), want pushed with the token it was granted", res.Outcome, res.Reason)
		}
	}
	m.drain(100)
	src.assertNewest(t, m.ota, "BK-1001")
}
