package dispatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// Booker books a group of slots with one write; *limiter.Limiter is one.
type Booker interface {
	ReserveBatch(ctx context.Context, b limiter.Bucket, req limiter.BatchRequest) (limiter.Batch, error)
}

// HandleJobs handles a batch of jobs, as a Lambda receives them. The jobs
// that need a slot are grouped by bucket, and each group of two or more is
// booked with one conditional write (if the Limiter is a Booker); then
// every job runs concurrently, each waiting for its own slot. Jobs the
// group could not book within MaxReserve reserve on their own and are
// deferred. results[i] and errs[i] are job i's, as from HandleJob.
func (d *Dispatcher) HandleJobs(ctx context.Context, jobs []job.Job) ([]Result, []error) {
	results, errs := make([]Result, len(jobs)), make([]error, len(jobs))
	first := map[string]int{}
	var todo []int
	for i, j := range jobs {
		// The same job holding the same slot twice in one batch is one
		// job delivered twice (a send retried after its answer was lost
		// is a second message with the same body). Pushing both would
		// spend the slot twice. Jobs that only share an ID are distinct
		// work (job.Identity), and both go.
		key := j.Identity() + "@" + j.Hold.At.String()
		if f, dup := first[key]; dup {
			results[i] = Result{JobID: j.ID, Outcome: Coalesced, Reason: fmt.Sprintf("duplicate of message %d in the same batch", f)}
			continue
		}
		first[key] = i
		todo = append(todo, i)
	}
	d.init()
	if booker := d.Can.Batch; booker != nil {
		d.prebookLingering(ctx, booker, jobs, todo)
		d.prebook(ctx, booker, jobs, todo)
	}
	var wg sync.WaitGroup
	for _, i := range todo {
		wg.Go(func() { results[i], errs[i] = d.HandleJob(ctx, jobs[i]) })
	}
	wg.Wait()
	return results, errs
}

// prebook gives slots to the jobs that would otherwise reserve one each.
// A failed booking is left to the jobs themselves: each then meets the
// same store error (or denial) and is deferred as usual.
func (d *Dispatcher) prebook(ctx context.Context, booker Booker, jobs []job.Job, todo []int) {
	now := d.now()
	groups := map[string][]int{}
	routes := map[string]Route{}
	for _, i := range todo {
		j := jobs[i]
		route, err := d.Routes.Route(j)
		if err != nil || len(route.Also) > 0 || route.Sharded != nil || route.ItemWeight > 0 || route.Horizon > 0 {
			continue // unroutable, several buckets, shards, items or a horizon: reserved one job at a time
		}
		if !d.needsSlot(j, route, now) {
			continue
		}
		groups[route.Bucket.Key] = append(groups[route.Bucket.Key], i)
		routes[route.Bucket.Key] = route
	}
	bookGroups(groups, func(key string, idx []int) {
		route := routes[key]
		// The first booking after an outage also books the pushes this
		// process paced locally meanwhile, as a single reservation does
		// (see pendingLocal): its first slots are theirs, spent already,
		// so that the bucket, full again, grants no burst on top of them.
		local := d.pendingLocal(route)
		batch, err := booker.ReserveBatch(ctx, route.Bucket, limiter.BatchRequest{N: local + len(idx), MaxDelay: d.Policy.MaxReserve, Partial: true})
		if err != nil {
			d.log().Info("batch booking failed; jobs reserve on their own", "bucket", key, "jobs", len(idx), "err", err)
			return
		}
		if len(batch.Slots) < local {
			// Not even the local pushes fit: they stay pending, and the
			// jobs' own reservations book them (again: quota lost, never
			// overspent).
			return
		}
		d.drainLocal(route, now)
		stamp := granted(batch.Stamp())
		for n, slot := range batch.Slots[local:] {
			jobs[idx[n]].Hold = newHold(slot, "", 0, stamp, slot.Sub(now))
		}
	})
}

// bookGroups runs book for every group of two or more jobs on one
// bucket (a single job books on its own), all groups at once: a group
// booked after another's round trip would hold its slots for that long
// before its jobs could use them.
func bookGroups(groups map[string][]int, book func(key string, idx []int)) {
	var wg sync.WaitGroup
	for key, idx := range groups {
		if len(idx) >= 2 {
			wg.Go(func() { book(key, idx) })
		}
	}
	wg.Wait()
}

// needsSlot reports whether HandleJob would reserve a slot for j with
// MaxReserve as its bound: jobs bounded by a deadline or their max age
// reserve on their own, so that they are shed or expired rather than
// booked past it.
func (d *Dispatcher) needsSlot(j job.Job, route Route, now time.Time) bool {
	if (!j.NotBefore.IsZero() && now.Before(j.NotBefore)) || d.rechecks(j) {
		return false // not due, or books only once its work is its own
	}
	if !j.Deadline.IsZero() && j.Deadline.Sub(now) <= d.Policy.MaxReserve {
		return false
	}
	if maxAge, _ := d.lifetime(route); j.FirstSeen.Add(maxAge).Sub(now) <= d.Policy.MaxReserve {
		return false
	}
	// A held slot is used or, once expired, re-acquired on its own.
	return !j.Hold.Held()
}

// prebookLingering books, with one write per bucket, the slots that
// lingering jobs would each ask for on their own (Dispatcher.lingerSlot):
// a batch of changes wakes its lanes together, and their jobs would
// otherwise all ask at once, one write each. The jobs that get a slot
// push at it; the others linger on without asking again (their bucket
// does not fill up before their linger ends, or the store failed: their
// reservation after the linger deals with it).
func (d *Dispatcher) prebookLingering(ctx context.Context, booker Booker, jobs []job.Job, todo []int) {
	now := d.now()
	groups := map[string][]int{}
	routes := map[string]Route{}
	reach := map[string]time.Duration{}
	for _, i := range todo {
		route, err := d.Routes.Route(jobs[i])
		if err != nil {
			continue
		}
		r, ok := d.lingerReach(jobs[i], route, now)
		if !ok {
			continue
		}
		k := route.Bucket.Key
		if prev, seen := reach[k]; !seen || r < prev {
			reach[k] = r // the group books within the shortest of its reaches
		}
		groups[k] = append(groups[k], i)
		routes[k] = route
	}
	bookGroups(groups, func(key string, idx []int) {
		// The local pushes of an outage first, as in prebook.
		local := d.pendingLocal(routes[key])
		batch, err := booker.ReserveBatch(ctx, burstOne(routes[key].Bucket), limiter.BatchRequest{N: local + len(idx), MaxDelay: reach[key], Partial: true})
		if err != nil || len(batch.Slots) < local {
			batch = limiter.Batch{}
		} else {
			d.drainLocal(routes[key], now)
			batch.Slots = batch.Slots[local:]
		}
		for n, i := range idx {
			if n < len(batch.Slots) {
				jobs[i].Hold, jobs[i].NotBefore = job.Hold{At: batch.Slots[n], Tokens: 1}, time.Time{}
			}
			jobs[i].Linger = false // asked; lingerSlot does not ask again
		}
	})
}
