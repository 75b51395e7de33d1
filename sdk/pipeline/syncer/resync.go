package syncer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/resync"
)

// ResyncReport is what a resync event made pending.
type ResyncReport struct {
	ResyncID string
	// Lanes counts the lanes marked, Scheduled those the resync found idle
	// and gave a bulk job.
	Lanes, Scheduled int
	// Cells and Dates count the (lane, cell) pairs and (lane, cell, date)
	// items marked.
	Cells, Dates int
	// Missing names the cells the store holds no state for in the window
	// ("channel kind room/plan"), and MissingDates counts every date
	// without state: reported, never invented.
	Missing      []string
	MissingDates int
	// Skipped names the connections the resync could not cover, with why
	// (a connection that maps no codes and a resync that names no cells, a
	// cell whose codes it does not map).
	Skipped []string
}

// Resync marks the lanes of r's property at the bulk class with every
// cell and date of r's window that the store holds, and returns the bulk
// pushes of the lanes it found idle, for the caller to run
// (Dispatcher.Run); HandleBatch does so for a resync event on the changes
// queue. It is idempotent: the lanes hold elements as a set, and a second
// delivery finds the lanes owned.
func (s *Syncer) Resync(ctx context.Context, r ari.Resync, redelivered bool) ([]dispatch.Task, ResyncReport, error) {
	return s.resync(ctx, nil, r, redelivered)
}

func (s *Syncer) resync(ctx context.Context, inv *invocation, r ari.Resync, redelivered bool) ([]dispatch.Task, ResyncReport, error) {
	// The kinds' lanes are apart (an item each) and planned from state of
	// their own: marked at once, a resync waits for its slowest kind, not
	// for the three one after the other.
	kinds := resync.Kinds(r)
	each := make([]kindMarks, len(kinds))
	var wg sync.WaitGroup
	for i, kind := range kinds {
		wg.Go(func() { each[i] = s.resyncKind(ctx, r, kind) })
	}
	wg.Wait()
	rep := ResyncReport{ResyncID: r.ResyncID}
	var errs []error
	for _, k := range each {
		rep.add(k.rep)
		errs = append(errs, k.err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, rep, err
	}
	var tasks []dispatch.Task
	for _, k := range each {
		for _, m := range k.marks {
			switch {
			case m.Claimed:
				s.owned.record(m.Pending.Owner, m.Pending.LeaseUntil, false)
				j := s.bulkJob(m.Lane, m.Pending.Owner)
				tasks, rep.Scheduled = append(tasks, s.laneTask(inv, j, m.Lane, laneRef{Token: m.Pending.Owner, Bulk: true})), rep.Scheduled+1
			case m.Pending.Owner != "" && (redelivered || s.leaseRunsOut(m.Pending)):
				// The owner may be the delivery of this resync that
				// died: come back when its lease runs out.
				ref := laneRef{Token: newBulkToken(), SeenOwner: m.Pending.Owner, Bulk: true}
				tasks = append(tasks, s.laneTask(inv, s.recheckJob(m.Lane, ref, m.Pending), m.Lane, ref))
			}
		}
	}
	if len(rep.Missing) > 0 || len(rep.Skipped) > 0 {
		slog.Warn("resync: cells not covered", "resync_id", r.ResyncID, "property", r.PropertyID,
			"missing", rep.Missing, "missing_dates", rep.MissingDates, "skipped", rep.Skipped)
	}
	return tasks, rep, nil
}

// kindMarks is what a resync did to one kind's lanes: its part of the
// report, the lanes' marks, and the error that stopped it.
type kindMarks struct {
	rep   ResyncReport
	marks []lane.Mark
	err   error
}

// add counts k's lanes and what it could not cover into rep.
func (rep *ResyncReport) add(k ResyncReport) {
	rep.Lanes, rep.Cells, rep.Dates = rep.Lanes+k.Lanes, rep.Cells+k.Cells, rep.Dates+k.Dates
	rep.Missing, rep.MissingDates = append(rep.Missing, k.Missing...), rep.MissingDates+k.MissingDates
	rep.Skipped = append(rep.Skipped, k.Skipped...)
}

// resyncKind marks the lanes of r's property and kind at the bulk class.
func (s *Syncer) resyncKind(ctx context.Context, r ari.Resync, kind string) (k kindMarks) {
	groups, err := s.planKind(ctx, r, kind, &k.rep)
	if err != nil {
		k.err = err
		return k
	}
	for _, g := range groups {
		marks, err := s.Lanes.Mark(ctx, g.lanes, g.elements, func(lane.ID) string { return newBulkToken() })
		if err != nil {
			k.err = err
			return k
		}
		k.rep.Lanes, k.rep.Cells, k.rep.Dates = k.rep.Lanes+len(g.lanes), k.rep.Cells+len(g.lanes)*g.cells, k.rep.Dates+len(g.lanes)*g.dates
		k.marks = append(k.marks, marks...)
	}
	return k
}

// markGroup is lanes of one property and kind that a resync marks with
// the same elements: one Mark, so one write to the item they share
// (lane.Store.Mark), not one a lane. An onboarding hotel's 15 lanes were
// 15 writes one after the other before its first bulk push could go, and
// a batch of resync events waits for its slowest
// (docs/benchmarks.md, the onboarding).
type markGroup struct {
	lanes        []lane.ID
	elements     []lane.Element
	cells, dates int // each lane's
}

// planKind reads the state the lanes of r's property and kind are marked
// with, noting in rep what it cannot cover, and groups the lanes it marks
// alike. The connections that cover the same cells (every channel's,
// where each maps the same codes) read the state once.
func (s *Syncer) planKind(ctx context.Context, r ari.Resync, kind string, rep *ResyncReport) ([]*markGroup, error) {
	targets, _, err := s.connections().Targets(ctx, r.PropertyID, kind)
	if err != nil {
		return nil, err
	}
	var groups []*markGroup
	plans := map[string]resync.Plan{}
	alike := map[string]*markGroup{} // by plan and month split
	for _, t := range targets {
		if r.Channel != "" && t.Channel != r.Channel {
			continue
		}
		id := lane.ID{Property: r.PropertyID, Kind: kind, Channel: t.Channel, Credential: t.Credential, HotelRef: t.HotelRef}
		cells, err := resync.Cells(r, t, kind)
		if err != nil {
			rep.Skipped = append(rep.Skipped, err.Error())
			continue
		}
		mapped := cells[:0:0]
		for _, c := range cells {
			if _, _, err := t.Codes.Map(c.RoomType, c.RatePlan); err != nil {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s %s %s/%s: %v", t.Channel, kind, c.RoomType, c.RatePlan, err))
				continue
			}
			mapped = append(mapped, c)
		}
		key := fmt.Sprint(mapped)
		plan, ok := plans[key]
		if !ok {
			if plan, err = resync.PlanKind(ctx, s.State, r, kind, mapped); err != nil {
				return nil, err
			}
			plans[key] = plan
		}
		for _, c := range plan.Missing {
			rep.Missing = append(rep.Missing, fmt.Sprintf("%s %s %s/%s", t.Channel, kind, c.RoomType, c.RatePlan))
		}
		rep.MissingDates += plan.MissingDates
		if len(plan.Elements) == 0 {
			continue
		}
		month := s.byMonth(id, nil)
		g := alike[fmt.Sprint(month, key)]
		if g == nil {
			g = &markGroup{elements: slices.Clone(plan.Elements), cells: plan.Cells, dates: plan.Dates}
			if month {
				g.elements = resync.ByMonth(g.elements)
			}
			alike[fmt.Sprint(month, key)] = g
			groups = append(groups, g)
		}
		g.lanes = append(g.lanes, id)
	}
	return groups, nil
}

// prepareResync handles a resync event from the changes queue.
func (s *Syncer) prepareResync(ctx context.Context, inv *invocation, m Message) ([]dispatch.Task, ChangeReport, error) {
	r, err := ari.ParseResync(m.Body)
	if err != nil {
		return s.rejectResync(ctx, "", m.Body, err.Error())
	}
	if _, ok, err := s.connections().Targets(ctx, r.PropertyID, resync.Kinds(r)[0]); err != nil {
		return nil, ChangeReport{}, err
	} else if !ok {
		return s.rejectResync(ctx, r.ResyncID, m.Body, unknownProperty(r.PropertyID))
	}
	tasks, rep, err := s.resync(ctx, inv, r, m.Redelivered)
	if errors.Is(err, lane.ErrRejected) {
		return s.rejectResync(ctx, r.ResyncID, m.Body, "marking its lanes failed: "+err.Error())
	}
	return tasks, ChangeReport{EventID: r.ResyncID, Lanes: rep.Lanes, Scheduled: rep.Scheduled, Resync: &rep}, err
}

func (s *Syncer) rejectResync(ctx context.Context, id, body, reason string) ([]dispatch.Task, ChangeReport, error) {
	rep, err := s.reject(ctx, id, body, reason)
	return nil, rep, err
}
