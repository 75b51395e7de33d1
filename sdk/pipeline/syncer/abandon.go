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

// Abandon gives up a dead-lettered lane job's lane (expired, shed,
// unroutable, its push refused or given up): it ends the owner's lease
// now, in one write, and leaves everything pending in the lane item,
// marked stranded. The sweep (Sweep) then takes the lane over and
// schedules a push of all that is pending, this job's elements included,
// without waiting for a change; a change that comes first takes it over
// itself (lane.Store.Mark).
//
// The lane counts a failure, which backs the sweep off (lane.SweepBackoff),
// unless the job ended expired or shed with no failed push: a lane behind
// an urgent backlog or a limiter outage expires again and again with no
// request sent, and is swept at once each time.
//
// The lease is ended rather than the lane released: lane.Store.Release
// refuses while anything is pending, and an expired job always leaves
// something; and a job redriven from the dead-letter queue after a fix
// still holds the owner token, so its claim succeeds and it pushes at once
// instead of finding no owner and ending.
//
// A job that no longer owns its lane (a
// second delivery of the same job, or one whose lane another job took
// over) gets dispatch.ErrNothingToPush, so one job is dead-lettered once;
// a recheck job, which owns nothing, has nothing to give up. A job on its
// queue's last receive whose lane another token holds lists the lane for
// the sweep all the same (strand), a recheck job too: past the owner's
// lease it takes the lane over, so an earlier receive of it may have
// claimed the lane and died there, under a token only that invocation
// knew (adversary seed 30 with deferred-deaths: a recheck job worked on
// its last receive and died, and the redrive left the lane held by its
// dead claim, listed for no sweep).
func (w *laneWork) Abandon(ctx context.Context, j job.Job, o dispatch.Outcome) error {
	s := w.s
	id, ref, _, err := w.lane(j)
	if err != nil || ref.SeenOwner != "" && !w.last {
		return nil
	}
	w.inv.leave(ref.Token)
	failed := j.Failures > 0 || (o != dispatch.Expired && o != dispatch.Shed)
	err = s.Lanes.EndLease(ctx, id, ref.Token, failed)
	var other *lane.NotOwnerError
	if errors.As(err, &other) && ref.ours(other.Pending.Owner) {
		// A claim of this job landed with its answer lost; the job,
		// redriven, claims from that token too.
		err = s.Lanes.EndLease(ctx, id, other.Pending.Owner, failed)
	}
	if errors.As(err, &other) && w.last && len(other.Pending.Elements) > 0 {
		return w.strand(ctx, id, other.Pending, failed)
	}
	if errors.As(err, &other) {
		return fmt.Errorf("%w: %v", dispatch.ErrNothingToPush, other)
	}
	if err == nil {
		s.owned.record(ref.Token, time.UnixMicro(0), false)
	}
	return err
}

// strand lists lane id, which a token the job does not know holds (p), for
// the sweep: the job came for its queue's last receive (receives.go), and
// an earlier receive of it may have claimed the lane and died, under a
// token only that invocation knew. Such an owner's lease is over (the
// queue's visibility timeout outlasts a lease), and the job is
// dead-lettered, a failure counted. A live owner's lane is listed all the
// same, counting nothing: the sweep looks at it only when that lease
// ends, and takes it over only if it was not renewed; the job, a copy of
// one that moved on, ends as a duplicate (dispatch.ErrNothingToPush).
func (w *laneWork) strand(ctx context.Context, id lane.ID, p lane.Pending, failed bool) error {
	over := !p.LeaseUntil.After(w.s.now())
	if err := w.s.Lanes.Strand(ctx, id, failed && over); err != nil || over {
		return err
	}
	return fmt.Errorf("%w: lane %s is owned by %s until %s; listed for the sweep", dispatch.ErrNothingToPush, id, p.Owner, p.LeaseUntil.Format(time.RFC3339Nano))
}
