package syncer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// Syncer handles both of the sync function's queues: it resolves each job
// once into a dispatch.Task (its route and its lane's work, task.go) and
// hands the batch's tasks to Dispatcher, which hands back their results.
type Syncer struct {
	Config     *config.Config
	State      *ari.Store
	Lanes      *lane.Store
	Dispatcher *dispatch.Dispatcher
	// Token returns a credential's API token from its token_env; default
	// os.Getenv. Tokens go into request headers only, never into logs or
	// messages.
	Token func(env string) string
	// Credential, if set, is used instead of Token: it returns the token a
	// credential's reference names (config.Credential.Ref), or why it
	// cannot be read now (credentials.Cache.Lookup: Secrets Manager unreachable,
	// throttled, slow). Such a job is deferred like one whose limiter store
	// is down, holding its lane, never dead-lettered as unroutable: the
	// token is there, only not readable at the moment.
	Credential func(ref string) (string, error)
	// Invalidate, if set, drops a cached token (by its reference) so that
	// Token or Credential reads it afresh: called when the vendor refuses
	// a token.
	Invalidate func(ref string)
	Now        func() time.Time
	// Linger is how long a lane collects changes before a push: its first
	// push after it was idle waits this long after the change that woke
	// it (changes that arrive meanwhile ride in the same request), and
	// while it stays dirty its pushes start at least a quarter of it
	// apart. DefaultLinger if zero; negative for none.
	Linger time.Duration
	// FillQuota makes every lane's linger yield to its bucket (per
	// endpoint: config.Endpoint.FillQuota): a lane
	// that lingers pushes early, at the moment its bucket would fill up,
	// rather than let the bucket lose the tokens it accrues while changes
	// wait (dispatch: job.Linger). Normal lanes on a meter with an urgent
	// reserve always do: a backlog behind urgent pushes is to use the
	// whole quota. Elsewhere, by default, a linger runs its
	// course: its merging saves requests and store calls per change while
	// the quota has room.
	FillQuota bool
	// Connections says where a property's changes go; nil: the Config's
	// properties (the connections file).
	Connections Connections
	// MaxReceives is the maxReceiveCount of the deferred queue's redrive
	// policy: a lane job received for that time is dead-lettered with a
	// reason and its lane handed to the sweep before it works
	// (receives.go). 0: unknown, and nothing is handed over.
	MaxReceives int

	owned   ownership
	dropped atomic.Int64
}

// DefaultLinger is the default Syncer.Linger: a second of latency saves a
// request for every change that lands in it (channel managers batch every
// few seconds; SiteMinder asks for updates within two minutes). The changes
// queue's batching window (ChangesBatchingWindow) comes before it, so an
// idle lane's first push goes out about two seconds after its change.
const DefaultLinger = time.Second

// ChangesBatchSize and ChangesBatchingWindow are the batches the changes
// queue's event source should hand a Syncer: under load a batch gathers up
// to 100 changes for at most a second, and HandleBatch marks the lanes of
// all of a batch's changes of one property and kind with one write, so a
// busy fleet pays well under one lane write per change. At light load the
// window is part of a change's wait before its push, with the Linger.
const (
	ChangesBatchSize      = 100
	ChangesBatchingWindow = time.Second
)

// ChangesHold is how long a change batch's pushes may wait in process for
// their slots. The lanes a batch wakes have their slots booked together
// (a batch's single write per bucket), at successive intervals of their
// bucket; a push whose slot is a few intervals away would otherwise take
// a trip through the deferred queue (a send, a receive, a delete and an
// invocation's share: about half of SQS's bill and of Lambda's in the
// simulated steady fleet) to wait less than a second. Pushes further
// away, a quota-bound backlog's, are deferred as before.
const ChangesHold = 500 * time.Millisecond

// ChangeReport is what became of one change event.
type ChangeReport struct {
	EventID string
	Applied int // dates whose state changed
	// Lanes counts the lanes the change marked, and Scheduled those it
	// found with no push pending, which it scheduled.
	Lanes, Scheduled int
	Results          []dispatch.Result
	Invalid          string // set when the event was dead-lettered
	// Resync is set for a resync event: what it made pending.
	Resync *ResyncReport
}

// HandleChange processes one changes-queue message. Malformed events and
// events for unknown properties are dead-lettered with the reason. A
// non-nil error means the message must stay on its queue; processing it
// again is safe (state writes are sequence-guarded, pushes send state).
func (s *Syncer) HandleChange(ctx context.Context, body string) (ChangeReport, error) {
	out := s.HandleBatch(ctx, []Message{{ID: "1", Body: body}})[0]
	return out.Change, out.Err
}

// Message is one SQS record of a batch.
type Message struct {
	ID, Body string
	// Deferred says it came from the deferred queue (a push job) rather
	// than the changes queue (a PMS change event).
	Deferred bool
	// Redelivered says the queue handed the message out before (its
	// ApproximateReceiveCount is above 1): the worker that had it may have
	// died between marking a lane and scheduling its push. A change Retry
	// sent again counts as redelivered too.
	Redelivered bool
	// Receives is the queue's ApproximateReceiveCount for the message (0:
	// unknown); a deferred job received for the MaxReceives-th time hands
	// its lane to the sweep (receives.go).
	Receives int
	// Attempt is how many times the change failed before, for a change
	// Retry sent again (its RetryAttribute); 0 otherwise.
	Attempt int
	// Owners tell the lanes the change's failed deliveries held (their
	// mark nonces, their claims' tokens: owners.go), for a change Retry
	// sent again (its RetryOwnersAttribute, OwnersOf): such a lane is this
	// delivery's to push, by a claim.
	Owners []string
}

// MessageResult is what became of one message. Err non-nil means it must
// stay on its queue (a batch item failure).
type MessageResult struct {
	ID     string
	Err    error
	Change ChangeReport      // for a change event
	Jobs   []dispatch.Result // every job the message produced or carried
	// Owners, for a failed change, tell the lanes its delivery held at
	// the end (as Message.Owners): Retry hands them to the change's copy.
	Owners []string
}

// prepareConcurrency bounds the state writes one batch has in flight: a
// batch of 100 changes sent at once would queue every push's store calls
// behind them (a single-threaded emulator shows it most), and ten keep a
// batch's writes flowing without starving the lanes' calls.
const prepareConcurrency = 10

// HandleBatch processes a Lambda batch from either queue. Changes are
// applied to state and fanned out, deferred jobs decoded; then all the
// jobs are dispatched together, so the jobs of one bucket are booked with
// one write (dispatch.Dispatcher.Run).
func (s *Syncer) HandleBatch(ctx context.Context, msgs []Message) []MessageResult {
	out := make([]MessageResult, len(msgs))
	inv := newInvocation(newNonce())
	jobsOf := make([][]dispatch.Task, len(msgs))
	changes := make([]*change, len(msgs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, prepareConcurrency)
	for i, m := range msgs {
		out[i].ID = m.ID
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			jobsOf[i], changes[i], out[i].Change, out[i].Err = s.prepare(ctx, inv, m)
		})
	}
	wg.Wait()
	marked, held := s.markAll(ctx, inv, msgs, changes, jobsOf, out)
	var all []dispatch.Task
	var owner []int
	for i, ts := range jobsOf {
		for _, t := range ts {
			all, owner = append(all, t), append(owner, i)
		}
	}
	var hold time.Time // the dispatcher's MaxHold
	if len(msgs) > 0 && !msgs[0].Deferred {
		// A change batch only wakes lanes: a push whose slot is more than
		// ChangesHold away goes to the deferred queue, so that this worker
		// is back for the next changes soon rather than busy with one
		// lane's backlog.
		hold = s.now().Add(ChangesHold)
	}
	results, errs := s.Dispatcher.Run(ctx, all, hold)
	for n, res := range results {
		i := owner[n]
		if errs[n] != nil {
			out[i].Err = errors.Join(out[i].Err, errs[n])
			continue
		}
		out[i].Jobs = append(out[i].Jobs, res)
		if !msgs[i].Deferred {
			out[i].Change.Results = append(out[i].Change.Results, res)
		}
	}
	for i := range out {
		if out[i].Err != nil && !msgs[i].Deferred {
			out[i].Owners = heldAfter(inv, marked[i], held[i], msgs[i].Owners)
		}
	}
	return out
}

// change is a change applied to state, to mark, with its property's
// connections of its kind as prepare read them.
type change struct {
	ari.Change
	targets []config.Target
}

// prepare turns a message into the tasks to dispatch, or, for a change,
// the change to mark once applied; it dead-letters what can never be
// processed.
func (s *Syncer) prepare(ctx context.Context, inv *invocation, m Message) ([]dispatch.Task, *change, ChangeReport, error) {
	if m.Deferred {
		j, err := job.Decode(m.Body)
		if err != nil {
			rep, err := s.reject(ctx, "", m.Body, err.Error())
			return nil, nil, rep, err
		}
		tasks, err := s.deferredTasks(ctx, inv, j, s.lastReceive(m))
		return tasks, nil, ChangeReport{}, err
	}
	if ari.IsResync(m.Body) {
		tasks, rep, err := s.prepareResync(ctx, inv, m)
		return tasks, nil, rep, err
	}
	c, err := ari.Parse(m.Body, s.Config.MaxRangeDays)
	if err != nil {
		rep, err := s.reject(ctx, "", m.Body, err.Error())
		return nil, nil, rep, err
	}
	targets, ok, err := s.connections().Targets(ctx, c.PropertyID, c.Kind)
	if err != nil {
		return nil, nil, ChangeReport{}, err
	} else if !ok {
		rep, err := s.reject(ctx, c.EventID, m.Body, unknownProperty(c.PropertyID))
		return nil, nil, rep, err
	}
	applied, err := s.State.Apply(ctx, c)
	if errors.Is(err, ari.ErrRejected) {
		rep, err := s.reject(ctx, c.EventID, m.Body, err.Error())
		return nil, nil, rep, err
	}
	if err != nil {
		return nil, nil, ChangeReport{}, err
	}
	rep := ChangeReport{EventID: c.EventID, Applied: applied.Changed}
	if applied.Current == 0 && !m.Redelivered {
		// Newer changes hold every date; each marks its own lanes after
		// writing, so there is nothing for this one to push. A delivery
		// after a failed one still marks: the failed one may have marked
		// (its answer lost, or it died after) and hold the lanes under a
		// token only this change's deliveries know, where the newer
		// changes' marks found them owned and left them to that owner.
		return nil, nil, rep, nil
	}
	return nil, &change{Change: c, targets: targets}, rep, nil
}

// markAll marks the lanes of a batch's applied changes: one write per
// property and kind, however many of the batch's changes share it. The
// jobs of the lanes it wakes go to the first message of each group.
// marked[i] says message i's lanes were marked (or the mark's write may
// have landed), and held[i] are the owner tokens of the lanes its mark
// holds.
func (s *Syncer) markAll(ctx context.Context, inv *invocation, msgs []Message, changes []*change, jobsOf [][]dispatch.Task, out []MessageResult) (marked []bool, held [][]string) {
	marked, held = make([]bool, len(msgs)), make([][]string, len(msgs))
	groups := map[[2]string][]int{}
	var order [][2]string
	for i, c := range changes {
		if c == nil {
			continue
		}
		k := [2]string{c.PropertyID, c.Kind}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	var wg sync.WaitGroup
	for _, k := range order {
		idx := groups[k]
		wg.Go(func() {
			redelivered := false
			var offered offers
			cs := make([]ari.Change, len(idx))
			for n, i := range idx {
				cs[n], redelivered = changes[i].Change, redelivered || msgs[i].Redelivered
				offered.add(msgs[i].Owners)
			}
			m, err := s.mark(ctx, inv, cs, changes[idx[0]].targets, redelivered, offered)
			if errors.Is(err, lane.ErrRejected) {
				s.rejectMarks(ctx, msgs, changes, idx, out, err)
				return
			}
			for _, i := range idx {
				out[i].Change.Lanes, marked[i], held[i] = m.lanes, true, m.held
				out[i].Err = errors.Join(out[i].Err, err)
			}
			out[idx[0]].Change.Scheduled = m.scheduled
			jobsOf[idx[0]] = append(jobsOf[idx[0]], m.jobs...)
		})
	}
	wg.Wait()
	return marked, held
}

// rejectMarks dead-letters the changes whose lanes the store refused to
// mark (lane.ErrRejected: the lane item over DynamoDB's size limit), with
// the reason: their state is written, and redriving them once the lanes
// are pushed marks them again.
func (s *Syncer) rejectMarks(ctx context.Context, msgs []Message, changes []*change, idx []int, out []MessageResult, err error) {
	for _, i := range idx {
		applied := out[i].Change.Applied
		rep, derr := s.reject(ctx, changes[i].EventID, msgs[i].Body, "marking its lanes failed: "+err.Error())
		rep.Applied = applied
		out[i].Change, out[i].Err = rep, errors.Join(out[i].Err, derr)
	}
}

func (s *Syncer) reject(ctx context.Context, id, body, reason string) (ChangeReport, error) {
	if err := s.Dispatcher.Queue.DeadLetter(ctx, body, reason); err != nil {
		return ChangeReport{}, err
	}
	return ChangeReport{EventID: id, Invalid: reason}, nil
}

func (s *Syncer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
