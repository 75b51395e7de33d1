package integration

import (
	"context"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// An owner whose invocations all die before they write (a deferred job
// killed 50 ms into each receive, beside a slow store) leaves its lane
// held, never stranded by a write of its own. The write that gave it its
// lease listed the item for the lease's end (Renew before a deferral,
// ClaimAfter), so Due finds it then and Sweep takes the lane over; a lane
// finished meanwhile is only unlisted. On moto's DynamoDB: the listing's
// if_not_exists and the counted relist are expressions the store runs.
func TestADeadOwnersLaneIsSweptFromItsListing(t *testing.T) {
	t.Parallel()
	const lease = time.Minute
	for _, tt := range []struct {
		name string
		// held gives the lane to its owner after the mark and returns
		// the owner; finished: the owner finishes the lane after.
		held     func(ctx context.Context, s *lane.Store, id lane.ID) (string, error)
		finished bool
		taken    int
	}{
		{"renewed before a deferral, then dead", func(ctx context.Context, s *lane.Store, id lane.ID) (string, error) {
			return "t", s.Renew(ctx, id, "t", s.Now().Add(3*lease))
		}, false, 1},
		{"claimed, then dead", func(ctx context.Context, s *lane.Store, id lane.ID) (string, error) {
			_, err := s.ClaimAfter(ctx, id, "t", nil, "next", nil)
			return "next", err
		}, false, 1},
		{"claimed and finished", func(ctx context.Context, s *lane.Store, id lane.ID) (string, error) {
			_, err := s.ClaimAfter(ctx, id, "t", nil, "next", nil)
			return "next", err
		}, true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			start := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
			now := start
			s := newLaneStore(t, func() time.Time { return now })
			s.Lease = lease
			id := lane.ID{Property: "h-dead", Kind: "rates", Channel: "booking_com", Credential: "c1", HotelRef: "BK-1"}
			els := []lane.Element{{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-01", To: "2027-01-03", Sequence: 1}}
			if marks, err := s.Mark(ctx, []lane.ID{id}, els, func(lane.ID) string { return "t" }); err != nil || len(marks) != 1 || !marks[0].Claimed {
				t.Fatalf("mark: %+v, %v", marks, err)
			}
			if due, err := s.Due(ctx, 0); err != nil || len(due) != 0 {
				t.Fatalf("due after a mark: %v, %v; want none (a mark lists nothing)", due, err)
			}
			owner, err := tt.held(ctx, s, id)
			if err != nil {
				t.Fatal(err)
			}
			if tt.finished {
				if released, _, err := s.Finish(ctx, id, owner, els); err != nil || !released {
					t.Fatalf("finish: %v, %v", released, err)
				}
			}
			var taken int
			for at := time.Duration(0); at <= 4*lease; at += lease / 2 {
				now = start.Add(at)
				due, err := s.Due(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range due {
					marks, err := s.Sweep(ctx, it, func(lane.ID) string { return "sweep" })
					if err != nil {
						t.Fatal(err)
					}
					taken += len(marks)
				}
				if taken > 0 {
					break
				}
			}
			if taken != tt.taken {
				t.Errorf("the sweep took %d lanes over 4 leases, want %d", taken, tt.taken)
			}
			if tt.finished {
				if due, err := s.Due(ctx, 0); err != nil || len(due) != 0 {
					t.Errorf("due after the sweep read a finished lane: %v, %v; want it unlisted", due, err)
				}
			}
		})
	}
}
