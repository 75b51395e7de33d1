package dispatch

import (
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// Task is one job as its resolver hands it to the dispatcher: the job, the
// route it was resolved to once, and the work it carries. The dispatcher
// reads everything it needs of the job's resolver from the task and calls
// nothing else of it: Work is the only way back, and it is the job's own.
type Task struct {
	Job job.Job
	// Route is where and under which limit the job is pushed. Err, if set,
	// is why the job has none: a *RouteUnavailableError (its Route set)
	// defers it for the store cooldown, any other dead-letters it as
	// unroutable.
	Route Route
	Err   error
	// Work is the state-backed work the job pushes (sdk/pipeline/syncer's
	// lane work); nil: the job pushes its payload. Shrink and Isolate are
	// what that work may also do, nil where it cannot.
	Work    Work
	Shrink  Shrink
	Isolate Isolate
	// Recheck: the job only comes back to find out whether its work is
	// its own (a lane job that found another owner holding the lane). It
	// begins its work before it books a slot, so that a job told to come
	// back again spends no token.
	Recheck bool
	// AtSlot: the job's work is begun only once its slot is booked, never
	// ahead of it. A bulk push (syncer's) holds its lane against live
	// changes from its claim to its send, so it claims only when a token
	// is its own; its slot is a token free at once, so nothing is gained
	// by beginning earlier.
	AtSlot bool
	// GiveUp, if set, dead-letters the job with this reason before any of
	// its work is begun, its work given up first (Work.Abandon) as for any
	// dead letter: a job its queue would otherwise move to the dead-letter
	// queue with no reason, its work still held (syncer's last receive).
	GiveUp string
	// Refresh, if set, drops the job's credential token and reports
	// whether a push the vendor refused with 401/403 should go out again:
	// a new token replaced it (a rotation), or it cannot be read now (the
	// job's next route defers it).
	Refresh func() bool
}

// task is a Task in the dispatcher's hands: its route (embedded), what
// its work can do, and when the call's hold on it ends. Unlike the job,
// it stays the same while the job is served and for the jobs its pushes
// hand back, which are the same work on the same route.
type task struct {
	Route
	work    Work
	shrink  Shrink
	isolate Isolate
	refresh func() bool
	// recheck: see Task.Recheck; cleared once the job owns its work.
	recheck bool
	// atSlot: see Task.AtSlot.
	atSlot bool
	// hold is when the call's hold ends: no job of it sleeps past it
	// (Policy.MaxHold, or a shorter bound of the caller's). Zero bounds
	// nothing.
	hold time.Time
	// configured is the route's own InFlight, which InFlight replaces
	// with the lease a learned cap asks (Dispatcher.inFlight).
	configured *limiter.InFlight
	// askedAgain: the job asked its bucket again at a short denial's
	// Retry-After, not at a turn (askers.go); its next denial books a turn.
	askedAgain bool
}

// slotless reports whether t books no slot: it is dead-lettered (or, its
// route unavailable, deferred) before any.
func (t Task) slotless() bool { return t.Err != nil || t.GiveUp != "" }

func newTask(t Task, hold time.Time) *task {
	return &task{Route: t.Route, work: t.Work, shrink: t.Shrink, isolate: t.Isolate, refresh: t.Refresh, recheck: t.Recheck, atSlot: t.AtSlot, hold: hold, configured: t.Route.InFlight}
}
