package syncer

import (
	"context"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// A change batch marks the lanes its changes fan out to (markAll, in
// syncer.go, groups them): one write per property and kind and set of
// elements its connections map (markMapped), and a job for each lane it
// found idle, which lingers for more changes before its push (lingerOf).

// marking is what a mark did: a job for each lane it woke or rechecks,
// how many lanes it marked and how many of them it scheduled, and the
// owner tokens of the lanes this delivery holds.
type marking struct {
	jobs             []dispatch.Task
	lanes, scheduled int
	held             []string
}

// mark marks the lanes of changes (one property and kind, whose
// connections are targets) dirty with one
// write and returns a job for each lane it found idle. For a redelivered
// change it also returns a recheck job for each lane it found owned: that
// owner may be the worker that died with this very message, and the job
// takes the lane over if its lease runs out unrenewed. So does a change
// that finds its lane owned by another delivery of the same changes (a
// duplicate receive), whose worker may die after this one deleted the
// message. A lane that offered holds (what a failed delivery of these
// changes held, Message.Owners) is this delivery's: its job claims it at
// once.
func (s *Syncer) mark(ctx context.Context, inv *invocation, cs []ari.Change, targets []config.Target, redelivered bool, offered offers) (marking, error) {
	var out marking
	if len(targets) == 0 {
		return out, nil
	}
	ids := make([]lane.ID, len(targets))
	for i, t := range targets {
		ids[i] = lane.ID{Property: cs[0].PropertyID, Kind: cs[0].Kind, Channel: t.Channel, Credential: t.Credential, HotelRef: t.HotelRef}
	}
	els := make([]lane.Element, len(cs))
	seed := ""
	for i, c := range cs {
		els[i] = lane.Element{RoomType: c.RoomType, RatePlan: c.RatePlan, From: c.From, To: c.To, Sequence: c.Sequence}
		seed += c.EventID + "\x00" + els[i].String() + "\x00"
	}
	// The token is this delivery's own, so that its first push may go out
	// without a claim (invocation.go): a second delivery of the same
	// changes finds the lane owned and pushes nothing of its own. A
	// delivery that died holding the lane is recovered by its lease: the
	// next change takes the lane over, or the recheck below. The token
	// starts with what every delivery of these changes shares, so that
	// another delivery knows it; 26 characters in all, as long as a
	// claim's (every byte of the lane item is billed on every write). Its
	// tail derives from the invocation's nonce, which a copy of a failed
	// delivery is given (owners.go).
	var nonce string
	if inv != nil {
		nonce = inv.nonce
	} else {
		nonce = newNonce()
	}
	kins, tokens := markTokens(seed, nonce, ids)
	kin := func(id lane.ID) string { return kins[id] }
	tokenOf := func(id lane.ID) string { return tokens[id] }
	marks, err := s.markMapped(ctx, ids, targets, cs, els, tokenOf)
	if err != nil {
		return out, err
	}
	for i, m := range marks {
		if s.compact(ctx, m) {
			marks[i].Fresh = false
		}
		var bulkOwner string
		if !m.Claimed && takeable(m.Pending.Owner) {
			// A bulk job holds the lane, waiting for its slot: the change
			// takes it, to be pushed at the live class (bulk.go), and
			// hands it back to that job. A bulk push on its way out hands
			// it over when done.
			if m.Pending, bulkOwner, m.Claimed, err = s.takeFromBulk(ctx, m.Lane, m.Pending, tokenOf(m.Lane)); err != nil {
				return out, err
			}
		}
		if !m.Claimed && offered.holds(m.Pending.Owner, m.Lane) {
			// Our failed delivery's: not fresh, so its push claims, and
			// only one of this job and a deferred job of that delivery
			// under the same token pushes.
			m.Claimed, marks[i].Fresh = true, false
		}
		switch {
		case m.Claimed:
			s.owned.record(m.Pending.Owner, m.Pending.LeaseUntil, false)
			ref := laneRef{Token: m.Pending.Owner, BulkOwner: bulkOwner}
			if m.Unanswered != "" {
				// A lane our failed delivery held, whose takeover by this
				// mark failed: it may be the takeover's token's now, which
				// the job's claims and holds take as its own (ours).
				ref.Unanswered = []string{m.Unanswered}
			}
			j := s.lingered(s.pushJob(m.Lane, ref, func() []lane.Element { return m.Pending.Elements }), m.Lane, s.now().Add(s.lingerOf(m.Lane)))
			out.jobs, out.scheduled = append(out.jobs, s.laneTask(inv, j, m.Lane, ref)), out.scheduled+1
			out.held = append(out.held, m.Pending.Owner)
		case m.Pending.Owner != "" && (redelivered || strings.HasPrefix(m.Pending.Owner, kin(m.Lane)) || s.leaseRunsOut(m.Pending)):
			ref := laneRef{Token: newToken(), SeenOwner: m.Pending.Owner}
			if m.Unanswered != "" {
				ref.Unanswered = []string{m.Unanswered}
			}
			out.jobs = append(out.jobs, s.laneTask(inv, s.recheckJob(m.Lane, ref, m.Pending), m.Lane, ref))
		}
	}
	inv.marked(marks)
	out.lanes = len(marks)
	return out, nil
}

// recheckJob is the job that comes back for lane id, under ref, when the
// lease of p's owner runs out: to take the lane over if that owner died
// holding it.
func (s *Syncer) recheckJob(id lane.ID, ref laneRef, p lane.Pending) job.Job {
	j := s.laneJob(id, ref)
	j.NotBefore = p.LeaseUntil.Add(time.Second)
	return j
}

// leaseRunsOut reports whether a lane another delivery owns has less than
// half a lease left: its owner has not written for over half a lease, as
// one that died mid-batch does. A change that finds it so schedules a
// recheck for the lease's end, as a redelivered change does; otherwise
// nothing would come for the lane after its lease but its next change or
// the dead batch's return after the queue's visibility timeout (the
// simulated faults run, seed 1: days 5–9 minutes late). A fresh lease is
// left to its owner, which pushes what the change added: rechecking every
// owned lane would cost a deferred message for most of them.
func (s *Syncer) leaseRunsOut(p lane.Pending) bool {
	return p.LeaseUntil.Sub(s.now()) < s.Lanes.LeaseLength()/2
}

// markMapped marks each lane with the elements of changes its connection
// maps, in one write per set of lanes that take the same elements (one in
// all when nothing is unmapped). Each change a lane's connection does not
// map is dead-lettered for that lane (a refused change's letter: redriven
// once the mapping is fixed, it marks the lane again) and counted.
func (s *Syncer) markMapped(ctx context.Context, ids []lane.ID, targets []config.Target, cs []ari.Change, els []lane.Element, token func(lane.ID) string) ([]lane.Mark, error) {
	type group struct {
		ids []lane.ID
		els []lane.Element
	}
	var order []string
	groups := map[string]*group{}
	for i, t := range targets {
		key := make([]byte, len(cs))
		var ok []lane.Element
		for n, c := range cs {
			key[n] = '1'
			if _, _, err := t.Codes.Map(c.RoomType, c.RatePlan); err != nil {
				key[n] = '0'
				if err := s.deadLetterUnmapped(ctx, ids[i], els[n], err); err != nil {
					return nil, err
				}
				continue
			}
			ok = append(ok, els[n])
		}
		if len(ok) == 0 {
			continue
		}
		g, seen := groups[string(key)]
		if !seen {
			g = &group{els: ok}
			groups[string(key)] = g
			order = append(order, string(key))
		}
		g.ids = append(g.ids, ids[i])
	}
	var marks []lane.Mark
	for _, k := range order {
		m, err := s.Lanes.Mark(ctx, groups[k].ids, groups[k].els, token)
		if err != nil {
			return marks, err
		}
		marks = append(marks, m...)
	}
	return marks, nil
}

// compactAbove is how many pending elements a lane holds before a mark
// compacts them (lane.Coalesce): well above what a lane gathers between
// two pushes at a normal load, whose pushes then carry exactly the dates
// that changed, and far below what fills the lane item (about 40 bytes an
// element, for every lane of a property and kind, against 400 KB).
const compactAbove = 256

// compact merges a lane's pending elements once they pass compactAbove,
// into one per cell and block of max_range_days dates. It is
// opportunistic: a lane that changed since the mark, or a write that
// failed, is left to the next mark (the mark itself stands). It reports
// whether it tried: the lane may no longer hold what the mark read.
func (s *Syncer) compact(ctx context.Context, m lane.Mark) bool {
	if len(m.Pending.Elements) <= compactAbove {
		return false
	}
	merged := lane.Coalesce(m.Pending.Elements, s.Config.MaxRangeDays)
	if len(merged) >= len(m.Pending.Elements) {
		return false
	}
	_, _ = s.Lanes.Compact(ctx, m.Lane, m.Pending, merged)
	return true
}

// lingered is j, lane id's push, due at: it lingers until then for more
// changes, ending early if its bucket would fill up (lingerYields).
func (s *Syncer) lingered(j job.Job, id lane.ID, at time.Time) job.Job {
	j.NotBefore, j.Linger = at, s.lingerYields(id)
	return j
}

// lingerYields reports whether a lane's linger ends early when its bucket
// would fill up (FillQuota).
func (s *Syncer) lingerYields(id lane.ID) bool {
	ep := s.Config.Channels[id.Channel].Endpoints[id.Kind]
	return s.FillQuota || ep.FillQuota || (ep.UrgentReserve > 0 && !ep.Urgent())
}

// lingerOf is the linger of a lane: none for an urgent endpoint's, whose
// pushes must not wait to merge.
func (s *Syncer) lingerOf(id lane.ID) time.Duration {
	if s.Config.Channels[id.Channel].Endpoints[id.Kind].Urgent() {
		return 0
	}
	return s.linger()
}

func (s *Syncer) linger() time.Duration {
	switch {
	case s.Linger < 0:
		return 0
	case s.Linger == 0:
		return DefaultLinger
	}
	return s.Linger
}
