package syncer

import (
	"context"
	"errors"
	"slices"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// claim makes the lane the push's, under the owner token it returns, and
// returns what is pending. A lane this invocation marked fresh is the
// job's already, under the mark's token, while most of its lease is left;
// any other is claimed (lane.Store.ClaimAfter, from the job's token or an
// unanswered claim's), and then finishes on its own. A claim that failed
// otherwise than on its condition returns the token it offered all the
// same, which the lane may now hold.
func (s *Syncer) claim(ctx context.Context, inv *invocation, id lane.ID, ref laneRef, done []lane.Element) (string, lane.Pending, error) {
	if len(done) == 0 && len(ref.parts()) == 0 && ref.SeenOwner == "" {
		p, fresh := inv.unclaimed(ref.Token)
		if fresh && p.LeaseUntil.Sub(s.now()) > s.Lanes.LeaseLength()/2 {
			return ref.Token, p, nil
		}
	}
	inv.leave(ref.Token)
	next := newToken()
	if ref.Bulk {
		next = newPushingToken()
	}
	p, err := s.Lanes.ClaimAfter(ctx, id, ref.Token, ref.earlier(), next, done)
	var other *lane.NotOwnerError
	if errors.As(err, &other) && other.Pending.Owner == next {
		// The claim landed and its answer was lost; the SDK's retry then
		// found the lane already ours, and what it saw is what is pending.
		p, err = other.Pending, nil
	}
	if err == nil {
		s.owned.record(next, p.LeaseUntil, true)
		inv.claimed(ref.Token, next)
	}
	return next, p, err
}

// claimFromBulk makes a lane a bulk job holds waiting for its token
// (owner: takeable) the push's, under the pushing token it returns, as a
// live change takes it (takeFromBulk): the job that waits finds the lane
// another's when its own token comes.
func (s *Syncer) claimFromBulk(ctx context.Context, inv *invocation, id lane.ID, owner string) (string, lane.Pending, error) {
	next := newPushingToken()
	p, err := s.Lanes.ClaimAfter(ctx, id, owner, nil, next, nil)
	var other *lane.NotOwnerError
	if errors.As(err, &other) && other.Pending.Owner == next {
		p, err = other.Pending, nil // claimed, its answer lost
	}
	if err == nil {
		s.owned.record(next, p.LeaseUntil, true)
		inv.claimed(owner, next)
	}
	return next, p, err
}

// ours reports whether owner is one of the tokens ref's unanswered
// claims offered, or the parked token of ref's pushing token (a bulk
// push that did not go out, parked by Hold): the lane is the job's though
// it carries another token.
func (ref laneRef) ours(owner string) bool {
	return owner != "" && slices.Contains(ref.earlier(), owner)
}

// earlier are the tokens other than ref.Token that hold the lane for ref's
// job (ours), newest last.
func (ref laneRef) earlier() []string {
	if !isPushingToken(ref.Token) {
		return ref.Unanswered
	}
	return append(slices.Clip(ref.Unanswered), parkedOf(ref.Token))
}
