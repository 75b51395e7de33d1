// On an endpoint metered by items a push carries only what its tokens pay
// for, a few whole changes, so changes whose dates overlap would each send
// the shared dates again. The owner merges them first (design.md,
// endpoints metered by items).

package syncer

import (
	"context"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// mergeOverlaps is p, the lane's pending elements as the owner's claim
// read them, with the elements that share dates merged (lane.Merge) in
// the store, on an endpoint metered by items. A push sends each date's
// newest state, so a date sent once is sent for every change that held
// it; unmerged, a lane of changes each a few days long over the same
// weeks (a PMS repricing them again and again) sent its dates once per
// change, three to nine times its distinct items (adversary seeds 558,
// 559). Elements the job names stay as they are: those a part of it
// resumes, so their accepted dates do not go again, and those an
// isolation left apart (apart.go), so it goes on where it stopped. A
// merge that does not land (a mark added an element since the claim, or
// the write failed) leaves p as it was, all of which the push may carry:
// the next claim tries again.
func (s *Syncer) mergeOverlaps(ctx context.Context, id lane.ID, p lane.Pending, ref laneRef) lane.Pending {
	ep, ok := s.Config.Channels[id.Channel].Endpoints[id.Kind]
	if !ok || ep.Cost != config.CostItems || len(p.Elements) < 2 {
		return p
	}
	named := map[string]bool{}
	for _, pt := range ref.parts() {
		named[pt.Element] = true
	}
	for _, group := range ref.Apart {
		for _, e := range group {
			named[e] = true
		}
	}
	var kept, free []lane.Element
	for _, e := range p.Elements {
		if named[e.String()] {
			kept = append(kept, e)
		} else {
			free = append(free, e)
		}
	}
	merged, overlapped := lane.Merge(free, s.Config.MaxRangeDays)
	if !overlapped {
		return p
	}
	if q, ok, err := s.Lanes.MergeClaimed(ctx, id, p, append(kept, merged...)); err == nil && ok {
		return q
	}
	return p
}
