package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// Work is the state behind a state-backed job, handed over with it
// (Task.Work): what the job pushes is read at its slot, not when the job
// was made, and what it pushed is settled after. sdk/pipeline/syncer's
// lanes are the implementation: one job per lane at a time, each push
// carrying everything the lane has pending. The jobs a push hands back
// (Done's next) are the same work's.
type Work interface {
	// Begin takes j's work for a push and renders it. It returns j as it
	// now stands (its claim may have moved on), which is what the
	// dispatcher defers if the push cannot go out. ErrNothingToPush: j has
	// nothing to send (a duplicate delivery, or work another job took
	// over). ErrIdle: j's work has nothing pending after all. A
	// *RecheckError: j must come back at At to find out.
	Begin(ctx context.Context, j job.Job) (job.Job, Payload, error)
	// Done settles a push of p that the vendor accepted. A push refused
	// or given up is never settled: its job is dead-lettered and its work
	// given up (Abandon), so what it carried stays pending. next, if not nil, is the
	// job that pushes what is still pending; the dispatcher gives it a slot
	// and pushes or defers it like any other.
	Done(ctx context.Context, j job.Job, p Payload) (next *job.Job, err error)
	// Hold keeps j's claim on its work until at least until; it is called
	// before every deferral of j. ErrNothingToPush: the work is no longer
	// j's, and j is dropped rather than deferred.
	Hold(ctx context.Context, j job.Job, until time.Time) error
	// Abandon gives up j's claim on its work when j is dead-lettered as o
	// (Expired, Shed, DeadLettered), leaving what is pending for the next
	// job that takes the work up. o and j.Failures tell a job that sent
	// nothing (expired or shed behind a backlog) from one whose pushes
	// failed, which the work may back off from. ErrNothingToPush: the work
	// was no longer j's (a duplicate delivery), and j is dropped rather
	// than dead-lettered. Any other error is logged and j is dead-lettered
	// all the same; its claim then lapses by itself (Hold's until).
	Abandon(ctx context.Context, j job.Job, o Outcome) error
}

// Payload is one push's body, rendered by Work.Begin.
type Payload struct {
	Body []byte
	// Items counts the items (room type, rate plan and date) the body
	// carries, for metrics.
	Items int
	// State is the work's own, handed back to Done.
	State any
	// Messages, if set, are the push's requests in the work's message
	// format, sent in order, each paying its own tokens (see Message);
	// Body and Items then describe the first and the whole. Done sees
	// which were accepted.
	Messages []Message
}

// ErrNothingToPush says a job has nothing to send; see Work.
var ErrNothingToPush = errors.New("nothing to push")

// ErrIdle says a job's work turned out to have nothing pending: the slot
// it holds goes unused (a wasted slot).
var ErrIdle = errors.New("nothing pending")

// RecheckError asks for a job to come back at At, when what is unknown now
// (whether another holder of its work is still alive) will be known.
type RecheckError struct {
	At     time.Time
	Reason string
}

func (e *RecheckError) Error() string {
	return fmt.Sprintf("recheck at %s: %s", e.At.Format(time.RFC3339), e.Reason)
}

// The dispatcher's side of a task's work: it begins the work for a push
// (begin, at or ahead of the slot; recheck, before booking one), hands
// what Begin refused to decideBegin, and settles the push after the
// vendor's answer (done). A task without work pushes its payload job.

// begin returns what j pushes. A payload job first takes its fence: the
// key is the push (job.Identity) and its try, not its slot, since copies
// of one delivery may each have booked a slot of their own by now. Only
// the first copy to ask pushes; every later try of the job (a retry after
// a failed push) asks under the next number, since the job carries Tries
// on from here.
func (d *Dispatcher) begin(ctx context.Context, j job.Job, t *task) (job.Job, Payload, error) {
	if t.work != nil {
		start := d.now()
		j, p, err := t.work.Begin(ctx, j)
		if err == nil {
			d.prep.observe(d.now().Sub(start))
		}
		return j, p, err
	}
	if d.Fence != nil {
		// Copies come as long as the job lives.
		maxAge, _ := d.lifetime(t.Route)
		first, tag, err := d.Fence(ctx, fmt.Sprintf("%s@%d", j.Identity(), j.Tries), j.FenceTags, j.FirstSeen.Add(maxAge))
		if err != nil {
			if tag != "" {
				// The write may have landed: the job, deferred for the
				// store error, takes over what it holds when it comes back.
				j = j.WithFenceTag(tag)
			}
			return j, Payload{}, err
		}
		if !first {
			return j, Payload{}, fmt.Errorf("%w: another delivery of job %q (try %d) pushes", ErrNothingToPush, j.ID, j.Tries)
		}
		j.Tries, j.FenceTags = j.Tries+1, nil
	}
	return j, Payload{Body: j.Payload, Items: 1}, nil
}

// beginFailed handles a Work.Begin that handed back no push. held says
// whether j held a slot, which then goes unused (a wasted slot).
func (d *Dispatcher) beginFailed(ctx context.Context, j job.Job, t *task, res Result, held bool, err error) (Result, error) {
	dec, ok := decideBegin(err, held, d.now())
	if !ok {
		res, _, err = d.workFailed(ctx, j, t, res, err)
		return res, err
	}
	if dec.Act == actCoalesce {
		res.Outcome, res.Reason = Coalesced, dec.Reason
		if dec.Wasted {
			res.WastedSlots = 1
		}
		return res, nil
	}
	out, err := d.act(ctx, j, t, dec)
	if dec.Act == actDefer {
		out.WastedSlots = 0
		if dec.Wasted {
			out.WastedSlots = 1
		}
	}
	return out, err
}

// recheck begins j, which holds no slot yet, to find out whether its work
// is its own. owned is j as the work's owner when it is, and p what Begin
// rendered, which its push carries (the preparation); otherwise res is
// what became of j (deferred to look again, or ended), with no slot spent.
func (d *Dispatcher) recheck(ctx context.Context, j job.Job, t *task) (owned *job.Job, p Payload, res Result, err error) {
	next, p, err := d.begin(ctx, j, t)
	if err == nil {
		return &next, p, Result{}, nil
	}
	res, err = d.beginFailed(ctx, next, t, Result{JobID: j.ID}, false, err)
	return nil, Payload{}, res, err
}

// done settles a push with the work and returns the work's next job. The
// vendor has answered by now, so a push's in-flight lease is freed first:
// the lease bounds requests at the vendor, and settling is a store write
// that may also wait for the lane's siblings (syncer's finish groups),
// which would otherwise hold the vendor's concurrency idle.
func (d *Dispatcher) done(out settle, j job.Job, t *task, p Payload, res Result) (Result, *job.Job, error) {
	out.release()
	ctx := out.base
	if t.work == nil {
		return res, nil, nil
	}
	next, err := t.work.Done(ctx, j, p)
	if next != nil {
		// The lane's next push goes to the same vendor, which took no
		// larger request of this one.
		next.Fit = fitOf(*next, j)
	}
	if err != nil {
		// The push went out; what it carried is still pending and will be
		// pushed again: the vendor gets the same state twice, never less.
		d.log().Warn("settling a push failed; the job comes back to retry", "job_id", j.ID, "err", err)
		def, derr := d.deferUnheld(ctx, j, t, d.Policy.StoreCooldown, "settling the push failed: "+err.Error())
		def.StoreError = true
		return res.then(def), nil, derr
	}
	return res, next, nil
}

// workFailed handles a Work.Begin that could not read its state: the slot
// is lost, and the job comes back after the store cooldown (fail closed).
func (d *Dispatcher) workFailed(ctx context.Context, j job.Job, t *task, res Result, err error) (Result, *job.Job, error) {
	if ctx.Err() != nil {
		return Result{}, nil, ctx.Err()
	}
	d.log().Warn("reading the job's work failed; deferring (fail closed)", "job_id", j.ID, "err", err)
	def, derr := d.deferUnheld(ctx, j, t, d.Policy.StoreCooldown, "reading its work failed: "+err.Error())
	def.StoreError, def.WastedSlots = true, 1
	return def, nil, derr
}
