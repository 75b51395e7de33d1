package syncer

// A lane job's payload (laneRef): which lane, the owner token it pushes
// under, and what of the lane's pending changes an earlier push left
// half sent (its parts, its groups apart), with the job made from it.

import (
	"encoding/json"
	"slices"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// laneRef is a lane job's payload: which lane, and the owner token the job
// pushes under.
type laneRef struct {
	PropertyID string `json:"property_id"`
	HotelRef   string `json:"hotel_ref"`
	Token      string `json:"token"`
	// SeenOwner is set on a job that found another owner holding the lane
	// and comes back to see whether that owner is still alive.
	SeenOwner string `json:"seen_owner,omitempty"`
	// Pushed are the elements the owner's previous push carried, which
	// its next claim clears.
	Pushed []string `json:"pushed,omitempty"`
	// Part and Parts name pending changes whose dates before From went
	// out already: the lane's pushes carry the rest, then clear them. A
	// change too large for one push on an endpoint metered by items goes
	// so, and so does one whose first messages (a month each, split_by)
	// were accepted and whose later ones had to wait. The first part is
	// Part, which the previous release also reads; Parts holds the others.
	Part  *partRef  `json:"part,omitempty"`
	Parts []partRef `json:"parts,omitempty"`
	// Refused is set on the dead letter of a change the vendor refused
	// (refusedLetter): the job, redriven, marks the lane with it again.
	Refused []string `json:"refused,omitempty"`
	// Unanswered are the tokens this job's claims offered as next that
	// failed without an answer (at most lane.MaxUnanswered, the newest):
	// one that landed made its token the lane's owner, which is the job's
	// own (lane.Store.ClaimAfter).
	Unanswered []string `json:"unanswered,omitempty"`
	// Bulk: the job pushes at the bulk class (bulk.go), under bulk owner
	// tokens.
	Bulk bool `json:"bulk,omitempty"`
	// BulkOwner is, on a live job, the token of the bulk job its change
	// took the lane from (takeFromBulk): the live chain hands the lane
	// back to it (handToBulk), and that job, still on its way, pushes it.
	BulkOwner string `json:"bulk_owner,omitempty"`
	// LiveOwner is set on a bulk job that found its lane under that live
	// token, which took it while the job waited and hands it back: the
	// job holds nothing meanwhile (Hold) and comes back soon, backing off
	// while it finds the same owner again.
	LiveOwner string `json:"live_owner,omitempty"`
	// LiveWaits is how many looks in a row after the first found a live
	// token holding the lane: the job's next look backs off by it
	// (liveRecheck).
	LiveWaits int `json:"live_waits,omitempty"`
	// Apart are groups of pending changes, as the lane holds them, that
	// the previous push's isolation of a refusal had still to send
	// apart: this push sends each in messages of its own (apart.go).
	Apart [][]string `json:"apart,omitempty"`
}

// parts is every part ref names.
func (ref laneRef) parts() []partRef {
	if ref.Part == nil {
		return ref.Parts
	}
	return append([]partRef{*ref.Part}, ref.Parts...)
}

// withParts is ref naming parts (Part the first, Parts the rest).
func (ref laneRef) withParts(parts []partRef) laneRef {
	ref.Part, ref.Parts = nil, nil
	if len(parts) > 0 {
		first := parts[0]
		ref.Part, ref.Parts = &first, parts[1:]
	}
	return ref
}

// partRef is a pending element pushed in parts: its dates from From on
// are still to go.
type partRef struct {
	Element string `json:"element"`
	From    string `json:"from"`
}

// laneJob is the job that pushes lane id under ref.Token.
func (s *Syncer) laneJob(id lane.ID, ref laneRef) job.Job {
	ref.PropertyID, ref.HotelRef = id.Property, id.HotelRef
	payload, _ := json.Marshal(ref)
	return job.Job{
		ID:      id.String() + "@" + ref.Token,
		Channel: id.Channel, Credential: id.Credential, Endpoint: id.Kind,
		Payload: payload, FirstSeen: s.now(),
	}
}

// pushJob is the job that pushes pending, lane id's, under ref.Token,
// with the items the push would carry (expectedItems).
func (s *Syncer) pushJob(id lane.ID, ref laneRef, pending func() []lane.Element) job.Job {
	j := s.laneJob(id, ref)
	j.Items = s.expectedItems(id, pending)
	return j
}

// expectedItems is what a push of pending would carry, for the slot of an
// endpoint metered by items to book its tokens; 0 (unused) elsewhere, so
// request-metered lanes do not count items on every mark and push.
func (s *Syncer) expectedItems(id lane.ID, pending func() []lane.Element) int {
	if s.Config.Channels[id.Channel].Endpoints[id.Kind].ItemCost() == 0 {
		return 0
	}
	maxItems, _ := s.requestLimits(id)
	return min(countItems(pending()), maxItems)
}

// rebased is j under ref: the same job (slot, deferrals, timing) pushing
// under another owner token.
func (s *Syncer) rebased(j job.Job, id lane.ID, ref laneRef) job.Job {
	next := s.laneJob(id, ref)
	j.ID, j.Payload = next.ID, next.Payload
	return j
}

// rebased is j under ref (see Syncer.rebased), its lane known.
func (w *laneWork) rebased(j job.Job, id lane.ID, ref laneRef, done []lane.Element) job.Job {
	return w.made(w.s.rebased(j, id, ref), id, ref, done)
}

// resume is pending with each element parts name (if still pending) cut
// to its dates from the part's From on, and the map from each cut element
// to the lane's.
func resume(pending []lane.Element, parts []partRef) ([]lane.Element, map[lane.Element]lane.Element) {
	if len(parts) == 0 {
		return pending, nil
	}
	from := make(map[string]string, len(parts))
	for _, p := range parts {
		from[p.Element] = p.From
	}
	out := append([]lane.Element(nil), pending...)
	var whole map[lane.Element]lane.Element
	for i, e := range out {
		f, ok := from[e.String()]
		if !ok || f <= e.From || f > e.To {
			continue
		}
		cut := e
		cut.From = f
		out[i] = cut
		if whole == nil {
			whole = map[lane.Element]lane.Element{}
		}
		whole[cut] = e
	}
	// A cut can equal an element the lane holds as well (a merged change
	// resumed from a date where the same change, delivered again, was
	// marked alone: adversary seed 696). The push carries its dates once,
	// as the cut, which clears the whole; the other stays pending for the
	// next push. Twice, its Done would clear one element twice, a string
	// set DynamoDB refuses (ValidationException, read as lane.ErrRejected).
	seen := make(map[lane.Element]bool, len(out))
	return slices.DeleteFunc(out, func(e lane.Element) bool {
		again := seen[e]
		seen[e] = true
		return again
	}), whole
}
