// Package dispatch decides, for each push job a worker receives, whether to
// push it now, defer it onto the queue, or shed it, and carries that out.
//
// The policy, in order:
//   - unroutable or malformed: dead-letter with the reason, never retried;
//   - due later (a chained wait past SQS's 15 minutes): defer the rest;
//   - deadline passed, or the earliest slot lands after it: shed to the
//     dead-letter queue with the reason, spending no token (the reservation
//     is bounded by the deadline, so it is refused rather than booked);
//   - holding a slot within grace: use it, with no second acquire;
//   - otherwise reserve a slot up to MaxReserve ahead;
//   - slot within BlockThreshold (and the invocation's remaining time):
//     sleep until it and push; further away: defer the job, slot and all;
//   - the limiter store unavailable: defer for StoreCooldown (fail closed);
//     the queue unavailable too: return an error, so the message stays on
//     its source queue and is redelivered. Nothing is lost.
package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/fleetbucket/fleetbucket/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/deferral"
	"github.com/fleetbucket/fleetbucket/sdk/job"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// Route is where and under which limit a job is pushed.
type Route struct {
	Bucket limiter.Bucket
	// Also are further buckets that must grant together with Bucket, in one
	// transaction: an OTA's per-minute window beside its per-second limit,
	// a property's share nested in the credential's quota.
	Also   []limiter.Bucket
	URL    string
	Header http.Header // e.g. the credential's Authorization header
}

// buckets is every bucket the route draws from, Bucket first.
func (r Route) buckets() []limiter.Bucket { return append([]limiter.Bucket{r.Bucket}, r.Also...) }

// MultiReserver is the part of *limiter.Limiter that books several buckets
// at once; the dispatcher needs it for routes with Also.
type MultiReserver interface {
	ReserveMulti(ctx context.Context, buckets []limiter.Bucket, n int, maxDelay time.Duration) (limiter.MultiReservation, error)
}

// Router resolves a job's channel, credential and endpoint. An error means
// the job can never be pushed (unknown channel or endpoint).
type Router interface {
	Route(j job.Job) (Route, error)
}

// Reserver is the part of *limiter.Limiter the dispatcher uses.
type Reserver interface {
	Reserve(ctx context.Context, b limiter.Bucket, n int, maxDelay time.Duration) (limiter.Reservation, error)
}

// Pusher is the part of *otapush.Client the dispatcher uses.
type Pusher interface {
	Push(ctx context.Context, req otapush.Request) (otapush.Response, error)
}

// Queue is the part of *deferral.Queue the dispatcher uses.
type Queue interface {
	Defer(ctx context.Context, j job.Job, wait time.Duration) error
	DeadLetter(ctx context.Context, body, reason string) error
}

// Policy holds the dispatcher's thresholds.
type Policy struct {
	// BlockThreshold: a slot at most this far away is waited for in
	// process; a later one is deferred onto the queue.
	BlockThreshold time.Duration
	// Grace: a job may use its slot up to this long after it; a later job
	// re-acquires. It is capped per bucket at (burst−1)·T/2 (but not below
	// 100 ms, the process's own latency): sends late by varying amounts
	// bunch up, and a vendor metering with the same bucket absorbs
	// lateness that varies by up to (burst−1)·T; half of that is left for
	// network jitter.
	Grace time.Duration
	// MaxReserve bounds how far ahead a slot is booked; by default SQS's
	// maximum delay, so a deferred job needs one trip through the queue.
	MaxReserve time.Duration
	// StoreCooldown is how long jobs are deferred while the limiter store
	// is unreachable (unless its circuit breaker says longer).
	StoreCooldown time.Duration
	// DeadlineMargin is kept free before the invocation's deadline: the
	// dispatcher never sleeps into it.
	DeadlineMargin time.Duration
}

// DefaultPolicy is the policy DESIGN.md describes.
var DefaultPolicy = Policy{
	BlockThreshold: time.Second,
	Grace:          2 * time.Second,
	MaxReserve:     deferral.MaxDelay,
	StoreCooldown:  10 * time.Second,
	DeadlineMargin: 3 * time.Second,
}

// Validate names the first field out of range.
func (p Policy) Validate() error {
	switch {
	case p.BlockThreshold < 0:
		return fmt.Errorf("dispatch policy: BlockThreshold is %v, want ≥ 0", p.BlockThreshold)
	case p.Grace < 0:
		return fmt.Errorf("dispatch policy: Grace is %v, want ≥ 0", p.Grace)
	case p.MaxReserve <= 0:
		return fmt.Errorf("dispatch policy: MaxReserve is %v, want > 0", p.MaxReserve)
	case p.StoreCooldown <= 0 || p.StoreCooldown > deferral.MaxDelay:
		return fmt.Errorf("dispatch policy: StoreCooldown is %v, want in (0, %v]", p.StoreCooldown, deferral.MaxDelay)
	case p.DeadlineMargin < 0:
		return fmt.Errorf("dispatch policy: DeadlineMargin is %v, want ≥ 0", p.DeadlineMargin)
	}
	return nil
}

// Outcome is what became of a job.
type Outcome string

const (
	Pushed       Outcome = "pushed"
	Deferred     Outcome = "deferred"
	Shed         Outcome = "shed"          // deadline: dead-lettered, no token spent
	DeadLettered Outcome = "dead-lettered" // malformed, unroutable, or refused by the vendor
	// Coalesced: Render found that newer changes have replaced everything
	// this job would push; their own jobs push it, so this one sends
	// nothing. Its reserved slot goes unused: quota wasted, never overspent.
	Coalesced Outcome = "coalesced"
)

// ErrSuperseded is what Render returns for a job whose whole payload newer
// jobs will push (or have pushed).
var ErrSuperseded = errors.New("superseded by newer changes")

// Result describes one handled job. Whatever the outcome, the message it
// came in is done with and may be deleted.
type Result struct {
	JobID   string
	Outcome Outcome
	Reason  string
	// Wait is the deferral's delay.
	Wait time.Duration
	// Slot is the slot the job held when pushed or deferred.
	Slot time.Time
	// Attempts is the number of requests the push sent, and Throttled how
	// many of them the vendor answered 429.
	Attempts, Throttled int
	// StoreError is set when the limiter store failed on the way.
	StoreError bool
	// WastedSlots counts slots this job held and left unused: expired
	// before it ran, or held by a job then shed, dead-lettered or
	// coalesced. They waste quota but never overspend it.
	WastedSlots int
}

// Dispatcher handles jobs. Its fields are its dependencies; all are required
// except Render, Now, Sleep and Log.
type Dispatcher struct {
	Routes  Router
	Limiter Reserver
	Pusher  Pusher
	Queue   Queue
	Policy  Policy
	// Render returns the body to push; by default the job's payload. A
	// state-backed deployment renders the current state here, so a late
	// job pushes the newest values rather than the ones it was made with,
	// and returns ErrSuperseded when there is nothing left for it to push.
	// With Render set, the dispatcher re-renders after each push and pushes
	// again if the state moved meanwhile.
	Render func(ctx context.Context, j job.Job) ([]byte, error)
	Now    func() time.Time
	Sleep  func(ctx context.Context, d time.Duration) error
	Log    *slog.Logger
}

// Validate checks the dispatcher is complete, at start-up.
func (d *Dispatcher) Validate() error {
	if d.Routes == nil || d.Limiter == nil || d.Pusher == nil || d.Queue == nil {
		return errors.New("dispatch: Routes, Limiter, Pusher and Queue are all required")
	}
	return d.Policy.Validate()
}

// Handle decodes a message body and handles the job in it. A malformed body
// is dead-lettered with the reason. A non-nil error means the message must
// stay on its source queue (the queue itself was unreachable, or ctx ended).
func (d *Dispatcher) Handle(ctx context.Context, body string) (Result, error) {
	j, err := job.Decode(body)
	if err != nil {
		return d.deadLetterBody(ctx, "", body, DeadLettered, err.Error())
	}
	return d.HandleJob(ctx, j)
}

// HandleJob applies the policy to one job.
func (d *Dispatcher) HandleJob(ctx context.Context, j job.Job) (Result, error) {
	route, err := d.Routes.Route(j)
	if err != nil {
		return d.deadLetter(ctx, j, DeadLettered, "unroutable: "+err.Error())
	}
	now := d.now()
	if !j.NotBefore.IsZero() && now.Before(j.NotBefore) {
		return d.deferJob(ctx, j, j.NotBefore.Sub(now), "not due yet (chained wait)", false)
	}
	if !j.Deadline.IsZero() && !now.Before(j.Deadline) {
		return d.deadLetter(ctx, j, Shed, fmt.Sprintf("deadline %s passed before the push", j.Deadline.Format(time.RFC3339)))
	}
	wasted := 0
	if !j.Slot.IsZero() && now.After(j.Slot.Add(d.grace(route.Bucket.Limit))) {
		d.log().Info("reserved slot expired; re-acquiring", "job_id", j.ID, "slot", j.Slot, "late", now.Sub(j.Slot))
		j.Slot, wasted = time.Time{}, 1
	}
	if j.Slot.IsZero() {
		res, done, err := d.reserve(ctx, &j, route, now)
		if done || err != nil {
			res.WastedSlots += wasted
			return res, err
		}
	}
	wait := j.Slot.Sub(now)
	if wait > d.Policy.BlockThreshold || !d.canSleep(ctx, wait) {
		// Come back once the slot is within blocking distance, and sleep
		// the rest. SQS delays are whole seconds: deferring the full wait,
		// rounded up, would make every deferred push late by up to a
		// second, and varying lateness bunches the sends the vendor counts.
		return d.deferJob(ctx, j, max(wait-d.Policy.BlockThreshold, 0), "waiting for its reserved slot", false)
	}
	if wait > 0 {
		if err := d.sleep(ctx, wait); err != nil {
			return Result{}, err
		}
	}
	res, err := d.push(ctx, j, route)
	res.WastedSlots += wasted
	return res, err
}

// reserve books a slot for j, bounded by its deadline. done reports that
// the job was disposed of (shed or deferred) instead.
func (d *Dispatcher) reserve(ctx context.Context, j *job.Job, route Route, now time.Time) (Result, bool, error) {
	maxDelay, bounded := d.Policy.MaxReserve, false
	if !j.Deadline.IsZero() && j.Deadline.Sub(now) <= maxDelay {
		maxDelay, bounded = j.Deadline.Sub(now), true
	}
	slot, err := d.reserveRoute(ctx, route, maxDelay)
	if err == nil {
		j.Slot = slot
		return Result{}, false, nil
	}
	if wait, denied := limiter.RetryAfter(err); denied {
		if bounded {
			res, err := d.deadLetter(ctx, *j, Shed, "no slot before the deadline "+j.Deadline.Format(time.RFC3339)+"; no token spent")
			return res, true, err
		}
		// Even MaxReserve ahead is booked: come back when it is not.
		res, err := d.deferJob(ctx, *j, wait, "bucket booked beyond MaxReserve", false)
		return res, true, err
	}
	if errors.Is(err, limiter.ErrInvalidArgument) {
		res, err := d.deadLetter(ctx, *j, DeadLettered, "route has an invalid limit: "+err.Error())
		return res, true, err
	}
	if ctx.Err() != nil {
		return Result{}, true, ctx.Err()
	}
	cooldown := d.Policy.StoreCooldown
	var open *breaker.OpenError
	if errors.As(err, &open) {
		cooldown = max(cooldown, open.RetryAfter)
	}
	d.log().Warn("limiter store unavailable; deferring (fail closed)", "job_id", j.ID, "bucket", route.Bucket.Key, "err", err)
	res, derr := d.deferJob(ctx, *j, cooldown, "limiter store unavailable", true)
	return res, true, derr
}

// maxRepushes bounds the pushes of one job that re-renders found stale.
const maxRepushes = 3

// reserveRoute books one token of every bucket of the route.
func (d *Dispatcher) reserveRoute(ctx context.Context, route Route, maxDelay time.Duration) (time.Time, error) {
	if len(route.Also) == 0 {
		r, err := d.Limiter.Reserve(ctx, route.Bucket, 1, maxDelay)
		return r.Slot, err
	}
	multi, ok := d.Limiter.(MultiReserver)
	if !ok {
		return time.Time{}, &limiter.ArgumentError{Field: "route.also", Reason: fmt.Sprintf("the limiter (%T) cannot reserve several buckets at once", d.Limiter)}
	}
	r, err := multi.ReserveMulti(ctx, route.buckets(), 1, maxDelay)
	return r.Slot, err
}

func (d *Dispatcher) push(ctx context.Context, j job.Job, route Route) (Result, error) {
	res := Result{JobID: j.ID, Slot: j.Slot}
	body, err := d.render(ctx, j)
	if errors.Is(err, ErrSuperseded) {
		res.Outcome, res.Reason, res.WastedSlots = Coalesced, err.Error(), 1
		return res, nil
	}
	if err != nil {
		return Result{}, err
	}
	reserved := true
	for range maxRepushes {
		resp, err := d.Pusher.Push(ctx, otapush.Request{
			Bucket: route.Bucket, Also: route.Also, URL: route.URL, Header: route.Header, JobID: j.ID, Body: body, Reserved: reserved,
		})
		res.Attempts += resp.Attempts
		res.Throttled += resp.Throttled
		if err != nil {
			return d.pushFailed(ctx, j, res, err)
		}
		if d.Render == nil {
			break
		}
		// Another worker may have applied a newer change while this push
		// was in flight and pushed it first, in which case the vendor now
		// holds older values than the state. Re-read after the push and
		// push again until the state stood still: the last push to arrive
		// then always carries the newest state.
		again, err := d.render(ctx, j)
		if errors.Is(err, ErrSuperseded) {
			break // the newer change's own job pushes the rest
		}
		if err != nil {
			return Result{}, err
		}
		if bytes.Equal(again, body) {
			break
		}
		body, reserved = again, false
	}
	res.Outcome = Pushed
	return res, nil
}

func (d *Dispatcher) pushFailed(ctx context.Context, j job.Job, res Result, err error) (Result, error) {
	var perm *otapush.PermanentError
	var later *otapush.DeferError
	switch {
	case errors.As(err, &perm):
		dl, err := d.deadLetter(ctx, j, DeadLettered, perm.Error())
		dl.Attempts, dl.Throttled = res.Attempts, res.Throttled
		return dl, err
	case errors.As(err, &later):
		wait, storeDown := max(later.After, time.Second), errors.Is(later, limiter.ErrUnavailable)
		if storeDown {
			wait = d.Policy.StoreCooldown
		}
		j.Slot = time.Time{} // retries spent or lost it; the next run acquires afresh
		def, err := d.deferJob(ctx, j, wait, later.Error(), storeDown)
		def.Slot, def.Attempts, def.Throttled = res.Slot, res.Attempts, res.Throttled
		return def, err
	}
	return Result{}, err
}

func (d *Dispatcher) render(ctx context.Context, j job.Job) ([]byte, error) {
	if d.Render == nil {
		return j.Payload, nil
	}
	body, err := d.Render(ctx, j)
	if err != nil {
		return nil, fmt.Errorf("render job %q: %w", j.ID, err)
	}
	return body, nil
}

func (d *Dispatcher) deferJob(ctx context.Context, j job.Job, wait time.Duration, reason string, storeErr bool) (Result, error) {
	if err := d.Queue.Defer(ctx, j, wait); err != nil {
		return Result{}, err
	}
	return Result{JobID: j.ID, Outcome: Deferred, Reason: reason, Wait: wait, Slot: j.Slot, StoreError: storeErr}, nil
}

func (d *Dispatcher) deadLetter(ctx context.Context, j job.Job, o Outcome, reason string) (Result, error) {
	body, err := job.Encode(j)
	if err != nil {
		return Result{}, err
	}
	res, err := d.deadLetterBody(ctx, j.ID, body, o, reason)
	if !j.Slot.IsZero() {
		res.WastedSlots = 1
	}
	return res, err
}

func (d *Dispatcher) deadLetterBody(ctx context.Context, id, body string, o Outcome, reason string) (Result, error) {
	if err := d.Queue.DeadLetter(ctx, body, reason); err != nil {
		return Result{}, err
	}
	d.log().Warn("job dead-lettered", "job_id", id, "outcome", string(o), "reason", reason)
	return Result{JobID: id, Outcome: o, Reason: reason}, nil
}

// minGrace is lateness that is only this process's own latency (a slot
// booked "now" and used a few milliseconds later), never a late delivery:
// expiring slots on it would re-acquire every job of a small-burst bucket.
const minGrace = 100 * time.Millisecond

// grace is how late a job may use its slot under limit l.
func (d *Dispatcher) grace(l limiter.Limit) time.Duration {
	slack := time.Duration(int64(l.Burst-1)*l.Interval()/2) * time.Microsecond
	return min(d.Policy.Grace, max(slack, minGrace))
}

// canSleep reports whether waiting d leaves DeadlineMargin before ctx's
// deadline (a Lambda invocation's end).
func (d *Dispatcher) canSleep(ctx context.Context, wait time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || d.now().Add(wait+d.Policy.DeadlineMargin).Before(deadline)
}

func (d *Dispatcher) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dispatcher) sleep(ctx context.Context, wait time.Duration) error {
	if d.Sleep != nil {
		return d.Sleep(ctx, wait)
	}
	return ctxsleep.Sleep(ctx, wait)
}

func (d *Dispatcher) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}
