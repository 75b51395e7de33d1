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
