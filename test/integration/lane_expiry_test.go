package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// A stranded lane counts a failure only when its job's pushes failed at
// the vendor: the sweep backs off from those (15 min after the second in
// a row; an expiry between neither counts nor resets them), never from
// jobs that ended with nothing sent. Each row ends the lane's lease once
// per ending (the sweep takes it over in between, the backoff long over)
// and then asks when the sweep takes it up again.
func TestEndLeaseBacksOffOnlyFailedPushes(t *testing.T) {
	t.Parallel()
	id := lane.ID{Property: "hotel-aurora", Kind: "rates", Channel: "booking_com", Credential: "cred-1", HotelRef: "BK-1001"}
	const expired, failed = false, true
	tests := []struct {
		name    string
		endings []bool
		due     time.Duration // after the last stranding
	}{
		{"expired once", []bool{expired}, 0},
		{"expired four times in a row", []bool{expired, expired, expired, expired}, 0},
		{"failed once", []bool{failed}, 0},
		{"failed twice in a row", []bool{failed, failed}, 15 * time.Minute},
		{"failed three times, expiries between", []bool{failed, expired, failed, expired, failed}, 30 * time.Minute},
		{"expired after a failure", []bool{failed, expired}, 0},
		{"failed after expiries", []bool{expired, expired, expired, failed}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
			s := newLaneStore(t, func() time.Time { return now })
			swept := func() []lane.Mark {
				t.Helper()
				items, err := s.Due(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				var marks []lane.Mark
				for _, it := range items {
					m, err := s.Sweep(ctx, it, func(lane.ID) string { return fmt.Sprintf("swept-%d", now.Unix()) })
					if err != nil {
						t.Fatal(err)
					}
					marks = append(marks, m...)
				}
				return marks
			}
			if _, err := s.Mark(ctx, []lane.ID{id}, []lane.Element{el("DBL", 1)}, func(lane.ID) string { return "t0" }); err != nil {
				t.Fatal(err)
			}
			owner := "t0"
			for i, f := range tt.endings {
				if err := s.EndLease(ctx, id, owner, f); err != nil {
					t.Fatal(err)
				}
				if i == len(tt.endings)-1 {
					break
				}
				now = now.Add(5 * time.Hour) // past any backoff
				marks := swept()
				if len(marks) != 1 {
					t.Fatalf("ending %d: the sweep 5 h later took up %d lanes, want the lane", i, len(marks))
				}
				owner = marks[0].Pending.Owner
			}
			stranded := now
			if tt.due > 0 {
				now = stranded.Add(tt.due - time.Second)
				if marks := swept(); len(marks) != 0 {
					t.Fatalf("the sweep %v after the last stranding took the lane up, want it backed off for %v", now.Sub(stranded), tt.due)
				}
			}
			now = stranded.Add(tt.due)
			if marks := swept(); len(marks) != 1 {
				t.Fatalf("the sweep %v after the last stranding took up %d lanes, want the lane", tt.due, len(marks))
			}
		})
	}
}
