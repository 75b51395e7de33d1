// The bulk class: a resync's elements (lane.Element.Bulk) share their
// lanes with live changes, so a lane's pushes stay one at a time and the
// newest state is the last to arrive, but they are pushed only by jobs of
// the bulk class, which book a slot only when the bucket's tat ≤ now
// (bulkRoute). Which class holds a lane shows in its owner token
// (bulkTokenPrefix): a live change that finds a bulk owner takes the lane
// over (takeFromBulk) unless a bulk push is on its way out (a pushing
// token: the takeover waits for that push, which hands the lane to the
// live class), and a live chain whose live elements are all out hands the
// lane to a bulk job (handToBulk). See docs/design.md, "Resync: the bulk
// class".

package syncer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// bulkTokenPrefix starts the owner tokens of bulk jobs (newToken's start
// with "t-", mark tokens with a hash's hex): a change's mark reads from
// the token alone that the lane waits for a bulk slot.
const bulkTokenPrefix = "b-"

// A bulk push holds its lane under a pushing token from its claim (at its
// slot) until its send is settled, and no live change takes a lane so
// held: the push carries state read at its claim, and a live push that
// went out before it would be overwritten at the OTA by that older state.
// The change waits for that one push, whose Done hands the lane to the
// live class. Between pushes, and while a bulk job is deferred, the lane
// waits parked, under a token a live change takes over. Both are bulk
// tokens; a bulk token's hex never holds p or q.
const (
	pushingTokenPrefix = bulkTokenPrefix + "p"
	parkedTokenPrefix  = bulkTokenPrefix + "q"
)

func newBulkToken() string { return bulkTokenPrefix + strings.TrimPrefix(newToken(), "t-") }

// newPushingToken is a bulk claim's next owner, as long as any other token.
func newPushingToken() string { return pushingTokenPrefix + strings.TrimPrefix(newToken(), "t-")[1:] }

func isBulkToken(t string) bool { return strings.HasPrefix(t, bulkTokenPrefix) }

// isPushingToken reports whether t holds its lane for a bulk push on its
// way out: no live change takes the lane from it.
func isPushingToken(t string) bool { return strings.HasPrefix(t, pushingTokenPrefix) }

// takeable reports whether a live change's mark takes a lane owned by t
// over: t is a bulk job's, waiting for its slot.
func takeable(t string) bool { return isBulkToken(t) && !isPushingToken(t) }

// unpushed reports whether t is a bulk job's token that has pushed none of
// its lane yet (neither pushing nor parked): another bulk job granted its
// token may push the lane from it, as it loses nothing. A parked chain
// carries in its job what it sent of its elements (laneRef.Part), which a
// claim from its token would drop: the lane's next push would send those
// days again, and the chain, back at its own slot, would claim the lane
// back the same way, each dropping the other's parts (adversary seed
// 1205: 28 bulk jobs on one lane, born of SQS duplicates, each push the
// first 9 days of a 31-day element, for an hour).
func unpushed(t string) bool { return takeable(t) && !strings.HasPrefix(t, parkedTokenPrefix) }

// parkedOf is the token pushing token t parks its lane under; a job
// carrying t claims from either (laneRef.ours).
func parkedOf(t string) string { return parkedTokenPrefix + strings.TrimPrefix(t, pushingTokenPrefix) }

// bulkRoute is r for a bulk push: it books only a token free at once from
// a burst of 1, that is only when the bucket's tat ≤ now. Live pushes book
// ahead of tat as before, so a bulk grant puts at most one interval T in
// front of any live push, and a bulk push never books a slot ahead of
// one. On an endpoint metered by items a push's tokens cannot come from a
// burst of 1: the bulk push takes only tokens free at once, from the
// normal share of the burst. On a bucket with leased shares the burst
// keeps the leases' tokens (Share.LeasedTokens), which the shared part
// gives up: its burst is then 1.
func bulkRoute(r dispatch.Route) dispatch.Route {
	if r.ItemWeight == 0 {
		keep := 1
		if s := r.Bucket.Share; s != nil {
			keep += s.LeasedTokens()
		}
		r.Reserve += r.Bucket.Limit.Burst - keep // a drain empties the whole burst
		r.Bucket.Limit.Burst = keep
	}
	r.Horizon, r.OneAsker = time.Millisecond, true // the lanes of one bucket ask it in turn
	return r
}

// forClass is what a push of its class carries of pending: a bulk push
// the live elements first, then the bulk ones in date order (the first
// dates of every cell, then the next: on an endpoint that sends each
// month apart, a month of every cell goes in one request); a live push
// only the live ones (the bulk ones are left to the lane's bulk push).
// handOff: a live job found only bulk elements pending. whole maps the
// rest of an element a push left part of (resume) to the element: it
// keeps the element's place, so that the push that split it carries the
// rest first (Shrink, split), and the next push resumes it, not another.
func forClass(pending []lane.Element, whole map[lane.Element]lane.Element, bulk bool) (out []lane.Element, handOff bool) {
	live := make([]lane.Element, 0, len(pending))
	var rest []lane.Element
	for _, e := range pending {
		if e.Bulk() {
			rest = append(rest, e)
		} else {
			live = append(live, e)
		}
	}
	if !bulk {
		return live, len(live) == 0 && len(rest) > 0
	}
	from := func(e lane.Element) string {
		if w, ok := whole[e]; ok {
			return w.From
		}
		return e.From
	}
	// Dates in ari.DateLayout sort as strings.
	slices.SortStableFunc(rest, func(a, b lane.Element) int { return strings.Compare(from(a), from(b)) })
	return append(live, rest...), false
}

// wholeMonths is els (a prefix of pending that fits one push) less its
// last month's bulk elements when pending holds more of that month, for an
// endpoint that sends each month apart: that month then goes whole in the
// lane's next push, in one request, rather than in one request of each.
// It keeps els as it is if nothing else would go.
func wholeMonths(els, pending []lane.Element) []lane.Element {
	if len(els) == len(pending) || !pending[len(els)].Bulk() {
		return els
	}
	month := monthOf(pending[len(els)].From)
	n := len(els)
	for n > 0 && els[n-1].Bulk() && monthOf(els[n-1].From) == month {
		n--
	}
	if n == 0 {
		return els
	}
	return els[:n]
}

func monthOf(date string) string { return date[:min(len(date), 7)] }

// byMonth reports whether lane id's endpoint sends each calendar month in
// requests of its own, by enc, the encoding its job's route resolved (nil:
// read from the config).
func (s *Syncer) byMonth(id lane.ID, enc *encoding) bool {
	e, err := s.encodingOf(id, pushed{enc: enc})
	return err == nil && format.SplitOf(e.format, e.shape) == format.SplitMonth
}

// hasLive reports whether any of els is a live change's.
func hasLive(els []lane.Element) bool {
	for _, e := range els {
		if !e.Bulk() {
			return true
		}
	}
	return false
}

// handToBulk moves lane id from owner (a live job's) to a bulk token,
// clearing done (what owner's push delivered), and sends the lane's bulk
// job to the deferred queue: its route is resolved afresh there, at the
// bulk class. It reports whether the lane was handed over; a lane owner
// lost meanwhile is another's to push.
//
// back, if set, is the token of the bulk job a live change took the lane
// from (laneRef.BulkOwner): the lane goes back to it, and no job is sent,
// since that job is still on its way. Otherwise the new bulk job resumes
// parts, what the live chain knows was sent of the lane's elements (a
// bulk push that handed the lane to it, handToLive): without them it
// would send those days again. A second bulk job would find its
// lane pushed by the first and leave a granted token unused at the
// lane's end; before the first took its lane back when granted, each
// such lane's first job did (onboarding at 30 hotels a bucket, seed 1:
// 6 in 100 bulk grants, a recheck two minutes on).
func (s *Syncer) handToBulk(ctx context.Context, inv *invocation, id lane.ID, owner string, done []lane.Element, at time.Time, back string, parts []partRef) (bool, error) {
	next := cmp.Or(back, newBulkToken())
	p, err := s.Lanes.ClaimAfter(ctx, id, owner, nil, next, done)
	var other *lane.NotOwnerError
	if errors.As(err, &other) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	inv.claimed(owner, next)
	s.owned.record(next, p.LeaseUntil, true)
	if back != "" {
		return true, nil
	}
	j := s.laneJob(id, laneRef{Token: next, Bulk: true}.withParts(parts))
	j.FirstSeen = at
	if err := s.Dispatcher.Queue.Defer(ctx, j, 0); err != nil {
		// The lane is the bulk token's until its lease runs out; then the
		// next change or the sweep takes it up.
		return true, fmt.Errorf("hand lane %s to its bulk push: %w", id, err)
	}
	return true, nil
}

// handToLive moves lane id from owner (a bulk job's) to a live token,
// clearing done (what owner's push delivered), and sends the lane's live
// job, resuming parts, to the deferred queue: its route is resolved
// afresh there, at the live class. Live changes that found the lane held
// by a bulk push on its way out go so, after that one push. A lane lost
// meanwhile is another's to push.
func (s *Syncer) handToLive(ctx context.Context, inv *invocation, id lane.ID, owner string, done []lane.Element, parts []partRef) error {
	next := newToken()
	p, err := s.Lanes.ClaimAfter(ctx, id, owner, nil, next, done)
	var other *lane.NotOwnerError
	if errors.As(err, &other) {
		return nil
	}
	if err != nil {
		return err
	}
	inv.claimed(owner, next)
	s.owned.record(next, p.LeaseUntil, true)
	j := s.pushJob(id, laneRef{Token: next}.withParts(parts), func() []lane.Element { return p.Elements })
	if err := s.Dispatcher.Queue.Defer(ctx, j, 0); err != nil {
		return fmt.Errorf("hand lane %s to its live push: %w", id, err)
	}
	return nil
}

// takeFromBulk makes a live change's token the owner of a lane a bulk job
// holds waiting for its slot, so that the change is pushed at the live
// class rather than at the bulk job's next slot. No bulk push is rendered
// then (a rendered one holds a pushing token, which is not taken): the
// bulk job's claim at its slot finds the lane another's. ok: the lane is
// token's now, and from is the bulk token it took the lane from.
func (s *Syncer) takeFromBulk(ctx context.Context, id lane.ID, p lane.Pending, token string) (_ lane.Pending, from string, ok bool, err error) {
	for range 3 { // the bulk chain moves to a fresh token at each claim
		got, err := s.Lanes.ClaimAfter(ctx, id, p.Owner, nil, token, nil)
		var other *lane.NotOwnerError
		if err == nil {
			s.owned.record(token, got.LeaseUntil, true)
			return got, p.Owner, true, nil
		}
		if !errors.As(err, &other) {
			return p, "", false, err
		}
		if p = other.Pending; !takeable(p.Owner) {
			// Another's, or a bulk push on its way out, whose Done hands
			// the lane to the live class.
			return p, "", false, nil
		}
	}
	slog.Info("a bulk job kept moving its lane; the live change waits for it", "lane", id.String())
	return p, "", false, nil
}

// bulkJob is the job of a lane a resync marked: it lingers for nothing.
func (s *Syncer) bulkJob(id lane.ID, token string) job.Job {
	return s.laneJob(id, laneRef{Token: token, Bulk: true})
}
