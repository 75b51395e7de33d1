package dispatch

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// worker is a Dispatcher handed its jobs as its callers hand them: each
// job resolved once by Routes into a task whose work is Work (nil: a
// payload job), with what Work can also do.
type worker struct {
	*Dispatcher
	Work   scripted
	Routes routes
}

// routes resolves a job's channel, credential and endpoint, as the
// syncer's route does: an error means the job can never be pushed, but
// for a *RouteUnavailableError (not now).
type routes interface {
	Route(j job.Job) (Route, error)
}

// scripted is the work a test scripts: Abandon, Shrink, Refused and
// Rechecks are its if it has them.
type scripted interface {
	Begin(ctx context.Context, j job.Job) (job.Job, Payload, error)
	Done(ctx context.Context, j job.Job, p Payload) (*job.Job, error)
	Hold(ctx context.Context, j job.Job, until time.Time) error
}

// asWork is a scripted work as a Work: one without Abandon has nothing
// to give up.
type asWork struct{ scripted }

func (w asWork) Abandon(ctx context.Context, j job.Job, o Outcome) error {
	if a, ok := w.scripted.(interface {
		Abandon(context.Context, job.Job, Outcome) error
	}); ok {
		return a.Abandon(ctx, j, o)
	}
	return nil
}

func (w *worker) task(j job.Job) Task {
	t := Task{Job: j}
	t.Route, t.Err = w.Routes.Route(j)
	if w.Work == nil {
		return t
	}
	t.Work = asWork{w.Work}
	if s, ok := w.Work.(interface {
		Shrink(ctx context.Context, j job.Job, p Payload, items int) (Payload, error)
	}); ok {
		t.Shrink = s.Shrink
	}
	if s, ok := w.Work.(interface {
		Refused(ctx context.Context, j job.Job, p *Payload, i int, perm *otapush.PermanentError) ([]Message, []Letter, error)
	}); ok {
		t.Isolate = s.Refused
	}
	if r, ok := w.Work.(interface{ Rechecks(job.Job) bool }); ok {
		t.Recheck = r.Rechecks(j)
	}
	return t
}

func (w *worker) HandleJob(ctx context.Context, j job.Job) (Result, error) {
	return w.Do(ctx, w.task(j), time.Time{})
}

func (w *worker) HandleJobs(ctx context.Context, jobs []job.Job) ([]Result, []error) {
	return w.Run(ctx, w.tasks(jobs), time.Time{})
}

func (w *worker) tasks(jobs []job.Job) []Task {
	tasks := make([]Task, len(jobs))
	for i, j := range jobs {
		tasks[i] = w.task(j)
	}
	return tasks
}

// jobsOf is the jobs of tasks, as booking left them.
func jobsOf(tasks []Task) []job.Job {
	jobs := make([]job.Job, len(tasks))
	for i, t := range tasks {
		jobs[i] = t.Job
	}
	return jobs
}
