package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// sweepIndexStep is one step of TestDueListsEveryStrandedItem at a time after the
// start: strand a hotel's lane (mark it, end the lease), sweep its item,
// or finish its lane as the sweep's owner; then the items Due lists.
type sweepIndexStep struct {
	at            time.Duration
	strand, sweep []string
	finish        []string
	due           []string
}

// Due lists every item stranded by its sweep_at, until a sweep finds
// nothing left to do: the steps test/sim's TestDBQueriesTheSweepIndex
// runs on the simulation's store, here on moto's.
func TestDueListsEveryStrandedItem(t *testing.T) {
	t.Parallel()
	const lease = time.Minute
	tests := []struct {
		name  string
		steps []sweepIndexStep
	}{
		{"four stranded at one instant", []sweepIndexStep{
			{at: 0, strand: []string{"h1", "h2", "h3", "h4"}, due: []string{"h1", "h2", "h3", "h4"}},
		}},
		{"four stranded a second apart", []sweepIndexStep{
			{at: 0, strand: []string{"h1"}, due: []string{"h1"}},
			{at: time.Second, strand: []string{"h2"}, due: []string{"h1", "h2"}},
			{at: 2 * time.Second, strand: []string{"h3"}, due: []string{"h1", "h2", "h3"}},
			{at: 3 * time.Second, strand: []string{"h4"}, due: []string{"h1", "h2", "h3", "h4"}},
		}},
		{"a swept item is listed again at its lease's end", []sweepIndexStep{
			{at: 0, strand: []string{"h1", "h2"}, due: []string{"h1", "h2"}},
			{at: time.Second, sweep: []string{"h1"}, due: []string{"h2"}},
			{at: time.Second + lease - time.Millisecond, due: []string{"h2"}},
			{at: time.Second + lease, due: []string{"h1", "h2"}},
		}},
		{"an item with nothing left leaves the index", []sweepIndexStep{
			{at: 0, strand: []string{"h1", "h2"}, due: []string{"h1", "h2"}},
			{at: time.Second, sweep: []string{"h1"}, finish: []string{"h1"}, due: []string{"h2"}},
			{at: time.Second + lease, due: []string{"h1", "h2"}},
			{at: time.Second + lease, sweep: []string{"h1"}, due: []string{"h2"}},
			{at: time.Hour, due: []string{"h2"}},
			{at: time.Hour, strand: []string{"h1"}, due: []string{"h1", "h2"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			start := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
			now := start
			s := newLaneStore(t, func() time.Time { return now })
			s.Lease = lease
			id := func(h string) lane.ID {
				return lane.ID{Property: h, Kind: "rates", Channel: "booking_com", Credential: "c1", HotelRef: "BK-" + h}
			}
			els := []lane.Element{{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-01", To: "2027-01-03", Sequence: 1}}
			owners := map[string]string{}
			for i, st := range tt.steps {
				now = start.Add(st.at)
				for _, h := range st.strand {
					marks, err := s.Mark(ctx, []lane.ID{id(h)}, els, func(lane.ID) string { return "t-" + h })
					if err != nil || len(marks) != 1 || !marks[0].Claimed {
						t.Fatalf("step %d: mark %s: %+v, %v", i, h, marks, err)
					}
					if err := s.EndLease(ctx, id(h), "t-"+h, false); err != nil {
						t.Fatalf("step %d: end the lease of %s: %v", i, h, err)
					}
				}
				for _, h := range st.sweep {
					marks, err := s.Sweep(ctx, lane.Item{Property: h, Kind: "rates"}, func(lane.ID) string { return "sw-" + h })
					if err != nil {
						t.Fatalf("step %d: sweep %s: %v", i, h, err)
					}
					for _, m := range marks {
						owners[h] = m.Pending.Owner
					}
				}
				for _, h := range st.finish {
					if _, _, err := s.Finish(ctx, id(h), owners[h], els); err != nil {
						t.Fatalf("step %d: finish %s: %v", i, h, err)
					}
				}
				items, err := s.Due(ctx, 0)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				var got []string
				for _, it := range items {
					got = append(got, it.Property)
				}
				slices.Sort(got)
				if !slices.Equal(got, st.due) {
					t.Fatalf("step %d, %v after the start: Due lists %v, want %v", i, st.at, got, st.due)
				}
			}
		})
	}
}
