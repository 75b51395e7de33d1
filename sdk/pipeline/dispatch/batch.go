package dispatch

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Booker books a group of slots with one write (*limiter.Limiter's
// ReserveBatch).
type Booker func(ctx context.Context, b limiter.Bucket, req limiter.BatchRequest) (limiter.Batch, error)

// Run handles a batch of tasks, as a Lambda receives them, under one hold
// (see Do). The jobs
// that need a slot are grouped by bucket, and each group of two or more is
// booked with one conditional write (if the dispatcher can Batch; a
// sharded bucket's are dealt over its shards, see shardGroups); every
// job runs concurrently, each waiting for its own slot. Jobs the group
// could not book within MaxReserve reserve on their own and are deferred.
// results[i] and errs[i] are task i's, as from Do.
//
// A group's jobs start as soon as its own write returns, never after the
// batch's other writes: a slot due at once is the now its write read, the
// vendor counts the push when it arrives, and the bucket's margin covers
// only so much between the two (the simulated storm's lingering jobs,
// started after every bucket of their change batch was booked, reached
// the vendor 100 ms and more after their slots). A bucket with both
// lingering and due jobs books their groups one after the other, each
// with its own now, rather than race two writes on one item.
func (d *Dispatcher) Run(ctx context.Context, tasks []Task, hold time.Time) ([]Result, []error) {
	results, errs := make([]Result, len(tasks)), make([]error, len(tasks))
	first := map[string]int{}
	var todo []int
	for i, t := range tasks {
		j := t.Job
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
	var wg sync.WaitGroup
	start := func(idx []int) {
		for _, i := range idx {
			wg.Go(func() { results[i], errs[i] = d.Do(ctx, tasks[i], hold) })
		}
	}
	alone := todo
	if booker := d.Can.Batch; booker != nil {
		var groups map[string][]group
		groups, alone = d.groups(booker, tasks, todo)
		for _, gs := range groups {
			wg.Go(func() {
				for _, g := range gs {
					g.book(ctx)
					start(g.jobs)
				}
			})
		}
	}
	start(alone)
	wg.Wait()
	return results, errs
}

// group is two or more jobs of a batch whose slots in one bucket book
// with one write: book gives each its slot, or leaves it to book its own.
type group struct {
	jobs []int
	book func(ctx context.Context)
}

// groups sorts a batch's jobs into the groups that book together, by
// bucket (lingering jobs' early slots first, then the due jobs'), and the
// jobs that book alone. The two kinds never share a job: a lingering job
// is not due.
func (d *Dispatcher) groups(booker Booker, tasks []Task, todo []int) (map[string][]group, []int) {
	out := map[string][]group{}
	grouped := map[int]bool{}
	for _, kind := range []map[string]group{d.lingerGroups(booker, tasks, todo), d.dueGroups(booker, tasks, todo)} {
		for key, g := range kind {
			if len(g.jobs) < 2 {
				continue // a single job books on its own
			}
			out[key] = append(out[key], g)
			for _, i := range g.jobs {
				grouped[i] = true
			}
		}
	}
	var alone []int
	for _, i := range todo {
		if !grouped[i] {
			alone = append(alone, i)
		}
	}
	return out, alone
}

// dueGroups are the groups in which due jobs book the slots they would
// otherwise reserve one each. A failed booking is left to the jobs
// themselves: each then meets the same store error (or denial) and is
// deferred as usual.
func (d *Dispatcher) dueGroups(booker Booker, tasks []Task, todo []int) map[string]group {
	now := d.now()
	groups := map[string][]int{}
	routes := map[string]Route{}
	for _, i := range todo {
		route := tasks[i].Route
		if tasks[i].slotless() || len(route.Also) > 0 || route.ItemWeight > 0 || route.Horizon > 0 {
			continue // unroutable, given up, several buckets, items or a horizon: reserved one job at a time
		}
		if !d.needsSlot(tasks[i], now) {
			continue
		}
		groups[route.Bucket.Key] = append(groups[route.Bucket.Key], i)
		routes[route.Bucket.Key] = route
	}
	out := map[string]group{}
	for key, idx := range groups {
		if routes[key].Sharded != nil {
			maps.Copy(out, d.shardGroups(booker, routes[key], tasks, idx))
			continue
		}
		out[key] = group{jobs: idx, book: func(ctx context.Context) { d.bookDue(ctx, booker, routes[key], tasks, idx) }}
	}
	return out
}

// shardGroups deals the due jobs idx of a sharded route over its shards,
// from a random one, into a group a shard: each books about len(idx)/k
// slots at its shard's rate (rate/k) with one write, so the last slot comes
// about when it would in one bucket; a write a job would cost len(idx), and
// one shard for all would take k times as long. Pushes paced locally in an
// outage book with the jobs' own reservations (reserve adds them), so then
// none is grouped.
func (d *Dispatcher) shardGroups(booker Booker, route Route, tasks []Task, idx []int) map[string]group {
	shards, err := route.Sharded.Buckets()
	if err != nil || d.pendingLocal(route) > 0 {
		return nil
	}
	out := map[string]group{}
	k, first := min(len(shards), len(idx)), rand.IntN(len(shards))
	for s := range k {
		shard := shards[(first+s)%len(shards)]
		var dealt []int
		for n := s; n < len(idx); n += k {
			dealt = append(dealt, idx[n])
		}
		out[shard.Key] = group{jobs: dealt, book: func(ctx context.Context) { d.bookShard(ctx, booker, shard, tasks, dealt) }}
	}
	return out
}

// bookShard books the slots of the due jobs idx in one shard; a job it
// grants no slot reserves on its own.
func (d *Dispatcher) bookShard(ctx context.Context, booker Booker, shard limiter.Bucket, tasks []Task, idx []int) {
	now := d.now()
	batch, err := d.bookBatch(ctx, booker, shard, limiter.BatchRequest{N: len(idx), MaxDelay: d.Policy.MaxReserve, Partial: true, Ahead: d.bookingLead(tasks, idx)})
	if err != nil {
		d.log().Info("shard booking failed; its jobs reserve on their own", "bucket", shard.Key, "jobs", len(idx), "err", err)
		return
	}
	now = latest(now, d.now())
	for n, slot := range batch.Slots {
		taking(newHold(slot, shard.Key, 0, nil, slot.Sub(now))).apply(&tasks[idx[n]].Job)
	}
}

// bookingLead is how far ahead a batch books the slots of the due jobs
// idx: as long as its write takes to be answered, and the jobs' work to
// begin (prep.go), so that the first job reaches its slot prepared. The
// batch's later slots are further off already.
func (d *Dispatcher) bookingLead(tasks []Task, idx []int) time.Duration {
	m := tasks[idx[0]].Route.Bucket.Limit.Margin
	lead := d.granting.lead(d.Policy.MaxHold, m)
	for _, i := range idx {
		if tasks[i].Work != nil {
			return min(lead+d.prep.lead(d.Policy.MaxHold, m), d.Policy.MaxHold)
		}
	}
	return lead
}

// bookBatch books req in b with booker, learning how long its write took
// to be answered, as reserveAhead does: the next booking ahead, a batch's
// or a single job's, claims a now that far ahead.
func (d *Dispatcher) bookBatch(ctx context.Context, booker Booker, b limiter.Bucket, req limiter.BatchRequest) (limiter.Batch, error) {
	start := d.now()
	batch, err := booker(ctx, b, req)
	if err == nil {
		d.granting.observe(d.now().Sub(start))
	}
	return batch, err
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// bookDue books the slots of the due jobs idx of route's bucket.
func (d *Dispatcher) bookDue(ctx context.Context, booker Booker, route Route, tasks []Task, idx []int) {
	now := d.now()
	// The first booking after an outage also books the pushes this
	// process paced locally meanwhile, as a single reservation does
	// (see pendingLocal): its first slots are theirs, spent already,
	// so that the bucket, full again, grants no burst on top of them.
	local := d.pendingLocal(route)
	batch, err := d.bookBatch(ctx, booker, route.Bucket, limiter.BatchRequest{N: local + len(idx), MaxDelay: d.Policy.MaxReserve, Partial: true, Ahead: d.bookingLead(tasks, idx)})
	if err != nil {
		d.log().Info("batch booking failed; jobs reserve on their own", "bucket", route.Bucket.Key, "jobs", len(idx), "err", err)
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
	now = latest(now, d.now()) // how far ahead of its answer each slot lies, as in reserve
	for n, slot := range batch.Slots[local:] {
		taking(newHold(slot, "", 0, stamp, slot.Sub(now))).apply(&tasks[idx[n]].Job)
	}
}

// needsSlot reports whether Do would reserve a slot for t's job with
// MaxReserve as its bound: jobs bounded by a deadline or their max age
// reserve on their own, so that they are shed or expired rather than
// booked past it.
func (d *Dispatcher) needsSlot(t Task, now time.Time) bool {
	j, route := t.Job, t.Route
	if (!j.NotBefore.IsZero() && now.Before(j.NotBefore)) || t.Recheck {
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

// lingerGroups are the groups in which lingering jobs book the slots they
// would each ask for on their own (Dispatcher.lingerSlot): a batch of
// changes wakes its lanes together, and their jobs would otherwise all
// ask at once, one write each. The jobs that get a slot push at it; the
// others linger on without asking again (their bucket does not fill up
// before their linger ends, or the store failed: their reservation after
// the linger deals with it).
func (d *Dispatcher) lingerGroups(booker Booker, tasks []Task, todo []int) map[string]group {
	now := d.now()
	groups := map[string][]int{}
	routes := map[string]Route{}
	reach := map[string]time.Duration{}
	for _, i := range todo {
		route := tasks[i].Route
		if tasks[i].slotless() {
			continue
		}
		r, ok := d.lingerReach(tasks[i].Job, route, now)
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
	out := map[string]group{}
	for key, idx := range groups {
		out[key] = group{jobs: idx, book: func(ctx context.Context) { d.bookLingering(ctx, booker, routes[key], reach[key], tasks, idx) }}
	}
	return out
}

// bookLingering books the early slots of the lingering jobs idx of
// route's bucket, within reach, ahead by the store's latency and the
// jobs' work (bookingLead), as a due batch is: the first slot of a bucket
// full already is the now its write claims.
func (d *Dispatcher) bookLingering(ctx context.Context, booker Booker, route Route, reach time.Duration, tasks []Task, idx []int) {
	now := d.now()
	// The local pushes of an outage first, as in bookDue.
	local := d.pendingLocal(route)
	batch, err := d.bookBatch(ctx, booker, burstOne(route.Bucket), limiter.BatchRequest{N: local + len(idx), MaxDelay: reach, Partial: true, Ahead: d.bookingLead(tasks, idx)})
	if err != nil || len(batch.Slots) < local {
		batch = limiter.Batch{}
	} else {
		d.drainLocal(route, now)
		batch.Slots = batch.Slots[local:]
	}
	answered := latest(now, d.now())
	for n, i := range idx {
		if n < len(batch.Slots) {
			taking(newHold(batch.Slots[n], "", 1, nil, batch.Slots[n].Sub(answered))).apply(&tasks[i].Job)
		}
		tasks[i].Job.Linger = false // asked; lingerSlot does not ask again
	}
}
