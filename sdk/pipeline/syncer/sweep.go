package syncer

import (
	"context"
	"errors"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// SweepInterval is how often the stack's schedule sweeps (infra/stack):
// a lane whose job ended without delivering is pushed again within about
// this long the first time, and lane.SweepBackoff later after each time it
// ends undelivered again.
const SweepInterval = 5 * time.Minute

// SweepAction is the "action" of the input the stack's schedule invokes
// the sync function with every SweepInterval ({"action": "sweep"}): SQS
// batches have no such field.
const SweepAction = "sweep"

// maxSweptItems bounds the lane items one sweep takes up, so that a sweep
// after a long outage fits one invocation; the rest are found by the next.
const maxSweptItems = 500

// SweepReport is what one sweep did.
type SweepReport struct {
	// Items counts the lane items the sweep index listed as due, and
	// Lanes the stranded lanes the sweep took over and scheduled.
	Items, Lanes int
	Results      []dispatch.Result
}

// Sweep schedules a push for every lane left with pending changes and no
// live job (its job expired, was shed or dead-lettered, or gave up), so
// that no pending change waits for a future change. It reads only the
// items the sweep index lists as due (lane.Store.Due), takes each stranded
// lane over with a fresh owner (lane.Store.Sweep) and dispatches the
// lanes' jobs together, as a change batch does: a push whose slot is not
// now goes to the deferred queue.
//
// The stack runs it every SweepInterval; locally (no EventBridge), tests
// and the demo call it. An error leaves the rest for the next sweep:
// what was taken over and not scheduled is taken over again once its
// lease runs out.
func (s *Syncer) Sweep(ctx context.Context) (SweepReport, error) {
	items, err := s.Lanes.Due(ctx, maxSweptItems)
	rep := SweepReport{Items: len(items)}
	var tasks []dispatch.Task
	for _, it := range items {
		marks, serr := s.Lanes.Sweep(ctx, it, func(lane.ID) string { return newToken() })
		err = errors.Join(err, serr)
		for _, m := range marks {
			s.owned.record(m.Pending.Owner, m.Pending.LeaseUntil, true)
			ref := laneRef{Token: m.Pending.Owner}
			j := s.pushJob(m.Lane, ref, func() []lane.Element { return m.Pending.Elements })
			tasks = append(tasks, s.laneTask(nil, j, m.Lane, ref))
		}
	}
	rep.Lanes = len(tasks)
	if len(tasks) == 0 {
		return rep, err
	}
	results, errs := s.Dispatcher.Run(ctx, tasks, s.now())
	rep.Results = results
	return rep, errors.Join(append([]error{err}, errs...)...)
}
