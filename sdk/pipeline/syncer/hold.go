package syncer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// A deferred lane job keeps its lane: before every deferral the dispatcher
// asks its work to Hold it, which renews the owner's lease to cover the
// wait when the lease it holds would not (ownership: what this process
// knows of its leases), or parks a bulk push's lane for a live change to
// take.

// Hold renews the job's lease to cover a deferral until until, when the
// lease it holds would not.
func (w *laneWork) Hold(ctx context.Context, j job.Job, until time.Time) error {
	s := w.s
	id, ref, _, err := w.lane(j)
	if err != nil || ref.SeenOwner != "" || ref.LiveOwner != "" {
		return nil // not an owner: nothing to hold
	}
	w.inv.leave(ref.Token) // it leaves the invocation
	need := s.Lanes.LeaseFor(until)
	if isPushingToken(ref.Token) {
		// A bulk push that did not go out (failed, throttled): its lane
		// waits parked, for a live change to take, until it is back.
		return w.park(ctx, id, ref, need)
	}
	lease, listed, known := s.owned.lease(ref.Token)
	switch {
	case known && listed && !lease.Before(need.Add(-s.Lanes.LeaseLength()/2)):
		return nil
	case known:
		// A lease of this process's Mark is not listed for the sweep:
		// should every receive of the deferred job die before its first
		// write, SQS's redrive would take the message and nothing would
		// come back for the lane (lane.Store.Renew lists it).
		need = later(need, lease)
	case until.Sub(s.now()) < s.Lanes.LeaseLength()/2:
		// Deferred again before this process claimed it: its owner's
		// last write covered this deferral, and listed the lane (it was
		// this Hold's Renew or a claim of an earlier receive).
		return nil
	}
	err = s.Lanes.Renew(ctx, id, ref.Token, need)
	var other *lane.NotOwnerError
	if errors.As(err, &other) && ref.ours(other.Pending.Owner) {
		// A claim of this job landed with its answer lost.
		err = s.Lanes.Renew(ctx, id, other.Pending.Owner, need)
		if err == nil {
			return nil
		}
	}
	if errors.As(err, &other) {
		return w.notHeld(ref, other)
	}
	if err == nil {
		s.owned.record(ref.Token, need, true)
	}
	return err
}

// notHeld is what Hold answers for a job whose lane other holds: the job
// is dropped, the work no longer its own, unless it is a bulk job whose
// lane a live change took while it waited: that change's chain hands the
// lane back to it (laneRef.BulkOwner), so it is deferred all the same.
func (w *laneWork) notHeld(ref laneRef, other *lane.NotOwnerError) error {
	if owner := other.Pending.Owner; ref.Bulk && owner != "" && !isBulkToken(owner) {
		return nil
	}
	return fmt.Errorf("%w: %v", dispatch.ErrNothingToPush, other)
}

// park moves the lane of ref, a bulk job deferred after its claim, from
// its pushing token to the parked one, its lease to need. The job keeps
// its token and claims from either when it is back (laneRef.earlier).
func (w *laneWork) park(ctx context.Context, id lane.ID, ref laneRef, need time.Time) error {
	s := w.s
	parked := parkedOf(ref.Token)
	p, err := s.Lanes.ClaimAfter(ctx, id, ref.Token, ref.Unanswered, parked, nil)
	var other *lane.NotOwnerError
	if errors.As(err, &other) && other.Pending.Owner == parked {
		p, err = other.Pending, nil // parked already, or its answer lost
	}
	if errors.As(err, &other) {
		return w.notHeld(ref, other)
	}
	if err != nil {
		return err
	}
	if p.LeaseUntil.Before(need) {
		if err := s.Lanes.Renew(ctx, id, parked, need); err != nil {
			if errors.As(err, &other) {
				return fmt.Errorf("%w: %v", dispatch.ErrNothingToPush, other)
			}
			return err
		}
		p.LeaseUntil = need
	}
	s.owned.record(parked, p.LeaseUntil, true)
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
