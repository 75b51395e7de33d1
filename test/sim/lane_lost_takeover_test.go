package sim

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// failConditional is the lanes' view of the store: the next conditional
// write (a mark's write has no condition; the takeover after it has)
// fails, once, while fail is set: it lands and its answer is lost if
// landed, else it never reaches the table.
type failConditional struct {
	*DB
	fail, landed atomic.Bool
}

func (f *failConditional) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if in.ConditionExpression != nil && f.fail.CompareAndSwap(true, false) {
		if f.landed.Load() {
			if _, err := f.DB.UpdateItem(ctx, in, opts...); err != nil {
				return nil, err
			}
			return nil, errors.New("injected: the conditional write landed and its answer was lost")
		}
		return nil, errors.New("injected: the conditional write failed")
	}
	return f.DB.UpdateItem(ctx, in, opts...)
}

// A change whose mark finds a lane's owner gone (its lease run out) takes
// the lane over with a second write. That write's answer lost failed the
// whole change; its copy found every lane of the property whose lease had
// run out again, the failed copy's own takeovers among them (their jobs
// went with the failure), each another write that may fail. With 50
// connections a property nearly every copy failed: adversary seed 8 sent
// one change again 13 times, each time over another lane's lost answer.
// The mark stands without its takeover, and the lane is rechecked as any
// lane whose lease runs out: the change succeeds and the OTA gets the
// newest state.
func TestALostTakeoverDoesNotFailTheChange(t *testing.T) {
	for _, tt := range takeoverOutcomes {
		t.Run(tt.name, func(t *testing.T) {
			const died = "died-with-the-worker" // a delivery that marked the lane and died
			r := newStrandedLane(t, died, 0)
			r.handle(t, tt.fail, tt.landed, func(src *pmsOracle) syncer.Message {
				return syncer.Message{ID: "1", Body: src.change("rates", "DBL", "2027-01-05", "2027-01-07", 1)}
			})
		})
	}
}

// A change's copy that finds a lane its failed delivery held (offered),
// its lease run out, takes the lane as its own and tries to take it over
// for the lease. That takeover landing with its answer lost left the lane
// to the takeover's token, while the copy's push job held the failed
// delivery's: the job's hold before its linger found the lane another's
// and ended, and nothing came for the lane (adversary seed 8, stale, 4
// runs in about 145 at GOMAXPROCS=4). The job takes the takeover's token
// as its own.
func TestALostTakeoverOfAnOfferedLaneKeepsItsJob(t *testing.T) {
	for _, tt := range takeoverOutcomes {
		t.Run(tt.name, func(t *testing.T) {
			// The change's failed delivery marked the lane; its copy
			// carries the token it held. Its push lingers deferred, so
			// that the job holds the lane (laneWork.Hold) before it
			// claims it.
			const failed = "m-held-by-the-failed-delivery"
			r := newStrandedLane(t, failed, 5*time.Second)
			r.handle(t, tt.fail, tt.landed, func(src *pmsOracle) syncer.Message {
				return syncer.Message{ID: "1", Body: src.change("rates", "DBL", "2027-01-05", "2027-01-07", 1), Redelivered: true, Attempt: 1, Owners: []string{failed}}
			})
		})
	}
}

// takeoverOutcomes are what a mark's takeover write may meet.
var takeoverOutcomes = []struct {
	name         string
	fail, landed bool
}{
	{"the takeover answered", false, false},
	{"the takeover landed, its answer lost", true, true},
	{"the takeover failed", true, false},
}

// strandedLane is a memLanes rig whose hotel-aurora rates lane was marked
// by owner a lease and 5 s ago, its lease run out, and whose syncer's lane
// writes go through lost.
type strandedLane struct {
	m    *memLanes
	lost *failConditional
	src  *pmsOracle
}

func newStrandedLane(t *testing.T, owner string, linger time.Duration) strandedLane {
	t.Helper()
	lim := limiter.PerSecond(10, 5)
	const lease = 20 * time.Second
	m := newMemLanes(t, mockota.Config{Limit: lim}, connconfig.Booking(lim, "", auroraBK1001), nil)
	lost := &failConditional{DB: m.store}
	m.sy.Lanes = &lane.Store{DB: lost, Table: "state", Lease: lease, Now: m.clock.Now}
	if linger > 0 {
		m.sy.Linger = linger
	}
	id := lane.ID{Property: "hotel-aurora", Kind: "rates", Channel: "booking_com", Credential: "cred-1", HotelRef: "BK-1001"}
	el := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-01", To: "2027-01-01", Sequence: 1}
	then := m.clock.Now().Add(-lease - 5*time.Second)
	marker := &lane.Store{DB: m.store, Table: "state", Lease: lease, Now: func() time.Time { return then }}
	if _, err := marker.Mark(context.Background(), []lane.ID{id}, []lane.Element{el}, func(lane.ID) string { return owner }); err != nil {
		t.Fatal(err)
	}
	return strandedLane{m: m, lost: lost, src: newPMSOracle("hotel-aurora")}
}

// handle makes the next conditional lane write fail as fail and landed
// say, handles the message msg builds, drains the rig and checks the OTA
// holds the newest state.
func (r strandedLane) handle(t *testing.T, fail, landed bool, msg func(*pmsOracle) syncer.Message) {
	t.Helper()
	r.lost.fail.Store(fail)
	r.lost.landed.Store(landed)
	out := r.m.sy.HandleBatch(context.Background(), []syncer.Message{msg(r.src)})
	if len(out) != 1 || out[0].Err != nil {
		t.Fatalf("a change into a lane whose owner's lease ran out: %+v, want it handled", out)
	}
	if r.lost.fail.Load() {
		t.Fatal("no conditional write of the lanes was made: the takeover this test fails never happened")
	}
	r.m.results = append(r.m.results, out[0].Jobs...)
	r.m.pending = append(r.m.pending, r.m.sent.takeJobs(t, deferredURL)...)
	r.m.drain(100)
	r.src.assertNewest(t, r.m.ota, "BK-1001")
}
