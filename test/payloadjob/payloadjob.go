// Package payloadjob hands payload jobs to a dispatcher as a service that
// pushes jobs of its own does: each resolved to its route first, into a
// dispatch.Task with no work. The tests of payload jobs use it where the
// syncer, for lane jobs, resolves its own.
package payloadjob

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// Router resolves a job's channel, credential and endpoint
// (*syncer.Syncer's Route): an error means the job can never be pushed,
// but for a *dispatch.RouteUnavailableError (not now).
type Router interface {
	Route(j job.Job) (dispatch.Route, error)
}

// Dispatcher is a dispatcher with the routes of its payload jobs.
type Dispatcher struct {
	*dispatch.Dispatcher
	Routes Router
}

// Task is j resolved by Routes.
func (d Dispatcher) Task(j job.Job) dispatch.Task {
	t := dispatch.Task{Job: j}
	t.Route, t.Err = d.Routes.Route(j)
	return t
}

// HandleJob handles j within the policy's MaxHold (dispatch.Dispatcher.Do).
func (d Dispatcher) HandleJob(ctx context.Context, j job.Job) (dispatch.Result, error) {
	return d.Do(ctx, d.Task(j), time.Time{})
}

// HandleJobs handles a batch of jobs (dispatch.Dispatcher.Run).
func (d Dispatcher) HandleJobs(ctx context.Context, jobs []job.Job) ([]dispatch.Result, []error) {
	tasks := make([]dispatch.Task, len(jobs))
	for i, j := range jobs {
		tasks[i] = d.Task(j)
	}
	return d.Run(ctx, tasks, time.Time{})
}

// Handle decodes a message body and handles its job; a malformed body is
// dead-lettered with the reason. An error means the message stays on its
// source queue.
func (d Dispatcher) Handle(ctx context.Context, body string) (dispatch.Result, error) {
	j, err := job.Decode(body)
	if err != nil {
		if err := d.Queue.DeadLetter(ctx, body, err.Error()); err != nil {
			return dispatch.Result{}, err
		}
		return dispatch.Result{Outcome: dispatch.DeadLettered, Reason: err.Error()}, nil
	}
	return d.HandleJob(ctx, j)
}
