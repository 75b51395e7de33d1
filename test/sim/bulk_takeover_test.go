package sim

import (
	"context"
	"encoding/json"
	"fmt"
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
	m.clock.Advance(time.Minute)
	newer := src.change("rates", "DBL", "2027-02-03", "2027-02-03", 200)
	hook.live = liveChangeIn(t, m, newer)
	hook.armed.Store(true)
	body := resyncEvent(t, m, "2027-02-01", "2027-02-05")
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

// liveChangeIn handles change body in its own invocation on m, as another
// worker would inside the bulk push's store call, and keeps its results.
func liveChangeIn(t *testing.T, m *memLanes, body string) func() {
	return func() {
		for _, out := range m.sy.HandleBatch(context.Background(), []syncer.Message{{ID: "live", Body: body}}) {
			if out.Err != nil {
				t.Errorf("the live change: %v", out.Err)
			}
			m.results = append(m.results, out.Jobs...)
		}
	}
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

// bulkLaneRig is hotel-aurora on Booking.com (10/s, burst 5) with its
// DBL/BAR rates for 2027-02-01..05 delivered: a lane a resync can take.
func bulkLaneRig(t *testing.T) (*memLanes, *pmsOracle, limiter.Limit) {
	t.Helper()
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim}, connconfig.Booking(lim, "", auroraBK1001), nil)
	src := newPMSOracle("hotel-aurora")
	m.changes([]string{src.change("rates", "DBL", "2027-02-01", "2027-02-05", 100)}, 10)
	m.drain(100)
	return m, src, lim
}

// resyncEvent is the event resyncing hotel-aurora's DBL/BAR rates from
// from to to, at m's now.
func resyncEvent(t *testing.T, m *memLanes, from, to string) string {
	t.Helper()
	r := ari.Resync{ResyncID: "rs-1", PropertyID: "hotel-aurora", Kinds: []string{"rates"}, From: from, To: to,
		Cells: []ari.ResyncCell{{RoomType: "DBL", RatePlan: "BAR"}}}
	body, err := r.Event(m.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// waitingBulkJob resyncs hotel-aurora's DBL/BAR rates on m while its
// bucket is silenced, and returns the resync's bulk job, waiting for its
// token, out of m's deferred jobs, and when the bucket is free again.
func waitingBulkJob(t *testing.T, m *memLanes, lim limiter.Limit) (job.Job, time.Time) {
	t.Helper()
	m.clock.Advance(time.Minute)
	free := m.bookRates(lim, 10*time.Second)
	body := resyncEvent(t, m, "2027-02-01", "2027-02-05")
	m.handle([]syncer.Message{{ID: "rs-1", Body: body}})
	if len(m.pending) != 1 || !strings.Contains(m.pending[0].ID, "@b-") {
		t.Fatalf("deferred %v, want the resync's one bulk job", m.pending)
	}
	first := m.pending[0]
	m.pending = nil
	return first, free
}

// backAndPushes delivers bulk job j past its turn and fails the test
// unless it pushed (under the pushing token its claim moved it to).
func backAndPushes(t *testing.T, m *memLanes, j job.Job, what string) {
	t.Helper()
	m.pending = append([]job.Job{j}, m.pending...)
	m.clock.Advance(time.Second)
	n := len(m.results)
	m.deliverNext()
	var got []string
	for _, res := range m.results[n:] {
		if strings.Contains(res.JobID, "@b-") && res.Outcome == dispatch.Pushed && res.Pushes > 0 {
			return
		}
		got = append(got, fmt.Sprintf("%s (%s)", res.Outcome, res.Reason))
	}
	t.Errorf("%s: %v, want pushed with the token it was granted", what, got)
}

// A live change takes a lane from the bulk job waiting for its token, and
// its push hands the lane back to that job, still on its way, rather than
// to a new bulk job: a second job would find the lane pushed by the first
// and leave a granted token unused (onboarding at 30 hotels a bucket,
// seed 1: 6 in 100 bulk grants; FLEETBUCKET_SIM_PUSH_TRACE).
func TestLiveChangeHandsTheLaneBackToTheBulkJobItTookItFrom(t *testing.T) {
	m, src, lim := bulkLaneRig(t)
	first, free := waitingBulkJob(t, m, lim)

	m.clock.Set(free)
	m.changes([]string{src.change("rates", "DBL", "2027-02-03", "2027-02-03", 200)}, 10)
	for _, j := range m.pending {
		t.Errorf("deferred %s after the live push, want none: the lane goes back to the bulk job %s", j.ID, first.ID)
	}
	backAndPushes(t, m, first, "the bulk job the live change took the lane from")
	m.drain(100)
	src.assertNewest(t, m.ota, "BK-1001")
}

// A bulk job granted its token whose lane another bulk job holds, waiting
// for its own, pushes the lane, as a live change would take it: it found
// the lane another's and left its token unused, with a recheck two
// minutes on.
func TestBulkJobGrantedFindingItsLaneWithAWaitingBulkJobPushesIt(t *testing.T) {
	m, src, lim := bulkLaneRig(t)
	first, free := waitingBulkJob(t, m, lim)

	// Another bulk job's waiting token holds the lane.
	handLaneTo(t, m, first, "b-0123456789abcdef01234567")
	m.clock.Set(free)
	backAndPushes(t, m, first, "the bulk job whose lane another bulk job held waiting")
	src.assertNewest(t, m.ota, "BK-1001")
}

// A resync's bulk job whose lane a live change of the same batch took
// before the job's first deferral (its bucket silenced) is deferred, not
// dropped: the live chain hands the lane back to the job's token, and
// nothing else would push it (the onboarding at 30 hotels a bucket, seed
// 1: 17 lanes waited for the sweep, 4 minutes, before Hold kept such
// jobs).
func TestBulkJobDeferredWhileALiveChangeHoldsItsLaneIsKept(t *testing.T) {
	m, src, lim := bulkLaneRig(t)
	m.clock.Advance(time.Minute)
	m.bookRates(lim, 10*time.Second)
	body := resyncEvent(t, m, "2027-02-01", "2027-02-05")
	m.handle([]syncer.Message{{ID: "rs-1", Body: body}, {ID: "live", Body: src.change("rates", "DBL", "2027-02-03", "2027-02-03", 200)}})
	m.drain(100)
	for _, res := range m.results {
		if strings.Contains(res.JobID, "@b-") && res.Outcome == dispatch.Pushed && res.Pushes > 0 {
			return
		}
	}
	var got []string
	for _, res := range m.results {
		got = append(got, fmt.Sprintf("%s %s (%s)", res.JobID, res.Outcome, res.Reason))
	}
	t.Errorf("no bulk push: the resync's elements wait for a bulk job that is gone; results %v", got)
}

// A bulk job whose lane a live change took, and whose chain still holds
// it at the job's second look, comes back soon after the chain hands the
// lane back, not at the live owner's lease end: the chain sends no bulk
// job, so the lane stood idle up to two minutes (the -resync demo:
// hotel-0's availability in sync after 127.6 s, against 25–30 s).
func TestBulkJobIsBackSoonAfterALongLiveChainHandsItsLaneBack(t *testing.T) {
	m, src, lim := bulkLaneRig(t)
	first, free := waitingBulkJob(t, m, lim)

	// The live change lingers 5 s, so its chain holds the lane over the
	// bulk job's first looks.
	m.sy.Linger = 5 * time.Second
	m.clock.Set(free.Add(-500 * time.Millisecond))
	m.changes([]string{src.change("rates", "DBL", "2027-02-03", "2027-02-03", 200)}, 10)
	m.pending = append(m.pending, first)

	var live, bulk time.Time
	for i := 0; len(m.pending) > 0 && bulk.IsZero(); i++ {
		if i >= 100 {
			t.Fatalf("%d jobs still deferred after 100 deliveries", len(m.pending))
		}
		n := len(m.results)
		m.deliverNext()
		for _, res := range m.results[n:] {
			if res.Outcome != dispatch.Pushed || res.Pushes == 0 {
				continue
			}
			if strings.Contains(res.JobID, "@b-") {
				bulk = m.clock.Now()
			} else if live.IsZero() {
				live = m.clock.Now()
			}
		}
	}
	switch {
	case live.IsZero() || bulk.IsZero():
		t.Fatalf("live push at %v, bulk push at %v (from the bucket's free time): want both", live.Sub(free), bulk.Sub(free))
	case bulk.Sub(live) > 9*time.Second:
		t.Errorf("the bulk push went %v after the live chain's push handed its lane back, want at most 9s (its look backs off to 8s)", bulk.Sub(live))
	}
	m.drain(100)
	src.assertNewest(t, m.ota, "BK-1001")
}

// A copy of a bulk job (an SQS duplicate) whose lane another bulk chain
// holds parked ends at its look: the chain carries the lane, and the
// sweep takes the lane at the chain's lease end should the chain die. A
// copy that waited for that lease instead looked again at every renewal,
// and a parked chain renews at each of its deferrals, so copies lived for
// hours, each taking a turn and a free token at every look (adversary
// seed 1471: 1,238 copies of a resync's job, two lanes stale for 3 h).
func TestBulkJobCopyEndsWhenAnotherBulkChainHoldsItsLane(t *testing.T) {
	m, src, lim := bulkLaneRig(t)
	first, free := waitingBulkJob(t, m, lim)
	// Another bulk chain parked the lane between its pushes (a parked
	// token is b-q and 23 hex digits), its lease renewed past the copy's
	// look, as its Hold renews it at each deferral.
	const parked = "b-q0123456789abcdef0123456"
	id, token := handLaneTo(t, m, first, parked)
	ctx := context.Background()
	leaseEnd := free.Add(10 * time.Minute)
	if err := m.sy.Lanes.Renew(ctx, id, parked, leaseEnd); err != nil {
		t.Fatal(err)
	}

	m.clock.Set(free)
	m.pending = append(m.pending, first)
	n := len(m.results)
	m.deliverNext()
	for _, j := range m.pending {
		if strings.Contains(string(j.Payload), token) {
			t.Errorf("the copy was deferred to %v (%s), want it ended: the parked chain holds its lane", deliverAt(j).Sub(free), j.ID)
		}
	}
	for _, res := range m.results[n:] {
		if res.Outcome == dispatch.Deferred {
			t.Errorf("the copy's result: %s (%s), want it ended", res.Outcome, res.Reason)
		}
	}

	// The chain died holding the lane: its lease's end lists the lane,
	// and the sweep pushes what it held.
	m.pending = nil
	m.clock.Set(leaseEnd.Add(time.Minute))
	if rep, err := m.sy.Sweep(ctx); err != nil || rep.Lanes != 1 {
		t.Fatalf("sweep after the chain's lease: %+v, %v; want the lane taken over", rep, err)
	}
	m.pending = append(m.pending, m.sent.takeJobs(t, deferredURL)...)
	m.drain(100)
	src.assertNewest(t, m.ota, "BK-1001")
}

// handLaneTo moves the lane of bulk job j (hotel-aurora's Booking.com
// rates) from j's token to owner, as another bulk job's claim would, and
// returns the lane and j's token.
func handLaneTo(t *testing.T, m *memLanes, j job.Job, owner string) (lane.ID, string) {
	t.Helper()
	var ref struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(j.Payload), &ref); err != nil {
		t.Fatal(err)
	}
	id := lane.ID{Property: "hotel-aurora", Kind: "rates", Channel: "booking_com", Credential: "cred-1", HotelRef: "BK-1001"}
	if _, err := m.sy.Lanes.ClaimAfter(context.Background(), id, ref.Token, nil, owner, nil); err != nil {
		t.Fatal(err)
	}
	return id, ref.Token
}
