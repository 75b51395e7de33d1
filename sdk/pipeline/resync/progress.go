package resync

import (
	"context"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// Progress is how much of a resync is still pending on one lane.
type Progress struct {
	Lane lane.ID
	// Cells and Dates count the bulk cells and (cell, date) items the lane
	// still holds; Live counts its pending live changes.
	Cells, Dates, Live int
}

// LaneReader reads a lane (lane.Store.Read).
type LaneReader interface {
	Read(ctx context.Context, id lane.ID) (lane.Pending, error)
}

// ProgressOf reads what each lane still holds of resyncs: every bulk
// element pending, whichever resync marked it.
func ProgressOf(ctx context.Context, lanes LaneReader, ids []lane.ID) ([]Progress, error) {
	out := make([]Progress, 0, len(ids))
	for _, id := range ids {
		p, err := lanes.Read(ctx, id)
		if err != nil {
			return nil, err
		}
		pr := Progress{Lane: id}
		cells := map[string]bool{}
		items := map[string]bool{}
		for _, e := range p.Elements {
			if !e.Bulk() {
				pr.Live++
				continue
			}
			cells[e.RoomType+"#"+e.RatePlan] = true
			for _, d := range (ari.Change{From: e.From, To: e.To}).Dates() {
				items[e.RoomType+"#"+e.RatePlan+"#"+d] = true
			}
		}
		pr.Cells, pr.Dates = len(cells), len(items)
		out = append(out, pr)
	}
	return out, nil
}
