package sim

import (
	"context"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A delivery that died holding a lane leaves it owned until its lease runs
// out, and a change marked meanwhile only adds to it: nothing came for the
// lane after the lease but its next change, or the dead batch after the
// queue's visibility timeout (6 minutes in the stack). A change marked when
// less than half the lease is left schedules a recheck for the lease's
// end, as a redelivered one does, and the OTA gets the newest state; one
// that finds a fresh lease leaves the lane to its owner. The lease's age
// is set on the manual clock, which the lanes and the vendor share.
func TestChangeNearTheEndOfAnOwnersLeaseSchedulesARecheck(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	const lease = 20 * time.Second
	tests := []struct {
		name        string
		leaseLeft   time.Duration // when the change is marked
		wantRecheck bool
	}{
		{"most of the lease left: the owner's to push", 18 * time.Second, false},
		{"less than half the lease left: a recheck at its end", 5 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemLanes(t, mockota.Config{Limit: lim}, connconfig.Booking(lim, "", auroraBK1001), nil)
			m.sy.Lanes.Lease = lease
			ctx := context.Background()
			src := newPMSOracle("hotel-aurora")
			body := src.change("rates", "DBL", "2027-01-05", "2027-01-07", 1)
			id := lane.ID{Property: "hotel-aurora", Kind: "rates", Channel: "booking_com", Credential: "cred-1", HotelRef: "BK-1001"}
			el := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-01", To: "2027-01-01", Sequence: 1}
			// Another delivery marked the lane (lease − leaseLeft) ago and
			// has written nothing since.
			then := m.clock.Now().Add(tt.leaseLeft - lease)
			owner := &lane.Store{DB: m.store, Table: "state", Lease: lease, Now: func() time.Time { return then }}
			if _, err := owner.Mark(ctx, []lane.ID{id}, []lane.Element{el}, func(lane.ID) string { return "died-with-the-worker" }); err != nil {
				t.Fatal(err)
			}
			out := m.sy.HandleBatch(ctx, []syncer.Message{{ID: "1", Body: body}})[0]
			if !tt.wantRecheck {
				if out.Err != nil || len(out.Jobs) != 0 {
					t.Fatalf("a change into a freshly owned lane: %+v, want nothing scheduled (the owner pushes it)", out)
				}
				return
			}
			if out.Err != nil || len(out.Jobs) != 1 || out.Jobs[0].Outcome != dispatch.Deferred {
				t.Fatalf("a change into a lane whose lease runs out: %+v, want one recheck job deferred", out)
			}
			if w := out.Jobs[0].Wait; w > tt.leaseLeft+time.Second {
				t.Errorf("the recheck waits %v, past the lease's end (%v left, plus a second)", w, tt.leaseLeft)
			}
			m.pending = append(m.pending, m.sent.takeJobs(t, deferredURL)...)
			m.drain(100)
			src.assertNewest(t, m.ota, "BK-1001")
		})
	}
}
