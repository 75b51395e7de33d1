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
// queue's last receive whose lane is held by a token it does not know
// (an earlier receive's claim, its invocation dead) lists the lane for
// the sweep all the same (lane.Store.Strand) and is dead-lettered.
func (w *laneWork) Abandon(ctx context.Context, j job.Job, o dispatch.Outcome) error {
	s := w.s
	id, ref, _, err := w.lane(j)
	if err != nil || ref.SeenOwner != "" {
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
		// An earlier receive of this job may have claimed the lane under
		// a token the job never heard of, and died (receives.go): listed
		// whoever holds it, the lane is the sweep's once that lease is
		// over, and a live owner's is only looked at again then.
		return s.Lanes.Strand(ctx, id, failed)
	}
	if errors.As(err, &other) {
		return fmt.Errorf("%w: %v", dispatch.ErrNothingToPush, other)
	}
	if err == nil {
		s.owned.leased(ref.Token, time.UnixMicro(0))
	}
	return err
}
