// Package dispatch decides, for each push job a worker receives, whether to
// push it now, defer it onto the queue, or shed it, and carries that out.
//
// The policy, in order:
//   - unroutable or malformed: dead-letter with the reason, never retried;
//   - older than its route's max age (first seen + MaxAge), or about to
//     be deferred past its MaxDeferrals-th trip or its max age: expire it
//     to the dead-letter queue with the reason, so no job loops forever;
//   - due later (a chained wait past SQS's 15 minutes): defer the rest;
//   - deadline passed, or the earliest slot lands after it: shed to the
//     dead-letter queue with the reason, spending no token (the reservation
//     is bounded by the deadline, so it is refused rather than booked);
//   - a job that only comes back to see whether its work is its own
//     (Rechecker): ask the work first, and book a slot only once it is;
//   - holding a slot within grace: use it, with no second acquire;
//   - otherwise reserve a slot up to MaxReserve ahead (never past the
//     job's max age: with no slot before it, the job expires, spending no
//     token);
//   - slot within BlockThreshold (and the invocation's remaining time):
//     sleep until it and push; further away: defer the job, slot and all,
//     to come back early by the delivery lateness observed (Lead);
//   - after a push of state-backed work (Work), the work may hand back its
//     next job (a lane with more pending): it is reserved and pushed or
//     deferred the same way, in the same call;
//   - the limiter store unavailable: defer for StoreCooldown (fail closed);
//     the queue unavailable too: return an error, so the message stays on
//     its source queue and is redelivered. Nothing is lost. A route with
//     LocalShare instead pushes within this process's local share of the
//     limit (Dispatcher.LocalShare), and defers only when that share has
//     no token soon;
//   - a Shadow route reserves as above and records what enforcement would
//     have done (Result.ShadowWouldDefer, ShadowWouldShed, ShadowWait),
//     but pushes at once.
//
// State-backed work that a dead-lettered job carried is given up
// (Abandoner), so the next job to take it up finds it pending: that
// includes a push the vendor refused or that gave up after MaxFailures,
// whose work is never settled as if delivered. A credential the vendor
// refuses (401/403) with no new token to try pauses its bucket for the
// fleet, and the job waits with its work (Result.CredentialRefused).
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/fleetbucket/fleetbucket/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/fallback"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
)

// Route is where and under which limit a job is pushed.
type Route struct {
	Bucket limiter.Bucket
	// Also are further buckets that must grant together with Bucket, in one
	// transaction: an OTA's per-minute window beside its per-second limit,
	// a property's share nested in the credential's quota.
	Also []limiter.Bucket
	// Sharded, if set, spreads Bucket over shards (a hot key): a slot is
	// booked in one of them (ReserveSharded), and the push draws from that
	// shard. It cannot be combined with Also.
	Sharded *limiter.ShardedBucket
	URL     string
	Header  http.Header // e.g. the credential's Authorization header
	// Shadow: reserve and record what enforcement would do, but push at
	// once (connections' "mode": "shadow").
	Shadow bool
	// Horizon, if positive, is the furthest ahead this route books a slot
	// (instead of Policy.MaxReserve): normal pushes on a bucket that keeps
	// a reserve for urgent ones (Bucket's burst is then the normal share)
	// book only that far, and are deferred without a slot past it.
	Horizon time.Duration
	// Reserve is the part of the meter's burst that Bucket's burst leaves to
	// urgent pushes (with Horizon, on normal pushes): a throttle or a
	// drain their push meets empties the whole burst.
	Reserve int
	// ItemWeight > 0 meters the endpoint by items, each ItemWeight tokens,
	// instead of by requests (connections' "cost": "items"; see charge).
	// It needs a single Bucket: no Also, no Sharded.
	ItemWeight float64
	// LocalShare: while the limiter store is unreachable, push within this
	// process's share of the limit rather than defer (connections'
	// "on_store_unavailable": "local-share"). It needs
	// Dispatcher.LocalShare; without one the route fails closed.
	LocalShare bool
	// MaxAge and MaxDeferrals bound the life of the route's jobs
	// (connections' "max_age", "max_deferrals"); zero: the policy's.
	MaxAge       time.Duration
	MaxDeferrals int
	// InFlight, Quota: see lease.go, quota.go.
	InFlight *limiter.InFlight
	Quota    *limiter.QuotaBucket
}

// buckets is every bucket the route draws from, Bucket first.
func (r Route) buckets() []limiter.Bucket { return append([]limiter.Bucket{r.Bucket}, r.Also...) }

// ShardReserver is the part of *limiter.Limiter that books a slot in one
// shard of a sharded bucket; the dispatcher needs it for sharded routes.
type ShardReserver interface {
	ReserveSharded(ctx context.Context, s limiter.ShardedBucket, n int, maxDelay time.Duration) (limiter.Reservation, error)
}

// MultiReserver is the part of *limiter.Limiter that books several buckets
// at once; the dispatcher needs it for routes with Also.
type MultiReserver interface {
	ReserveMulti(ctx context.Context, buckets []limiter.Bucket, n int, maxDelay time.Duration) (limiter.MultiReservation, error)
}

// CredentialRefresher is what a Router may also do: replace a credential's
// token that the vendor refused (401/403), as after a rotation. It reports
// whether the token changed (or cannot be read now, which the job's route
// then reports), in which case the push is tried again rather than
// dead-lettered.
type CredentialRefresher interface {
	RefreshCredential(j job.Job) bool
}

// Fence tells the first of several deliveries of one job from the others
// (*limiter.Limiter is one): First is true exactly once per key before
// until, fleet-wide.
type Fence interface {
	First(ctx context.Context, key string, until time.Time) (bool, error)
}

// Router resolves a job's channel, credential and endpoint. An error means
// the job can never be pushed (unknown channel or endpoint), except a
// *RouteUnavailableError: not now (a token that cannot be read).
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

// Queue is the part of *queue.Queue the dispatcher uses.
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
	// LateRatio is how late, as a share of its delay, a deferred job may
	// come back; a deferral returns early by that share (never by less
	// than BlockThreshold) and sleeps the rest. The dispatcher raises it
	// to the lateness it observes. moto delivers about 6% late; an event
	// source mapping under scaling is late by seconds.
	LateRatio float64
	// MaxHold bounds how long one call keeps a job in process: sleeping
	// for a slot, or pushing the next job a push handed back. Past it, the
	// job is deferred with its slot, so that an invocation busy with a
	// lane that keeps changing still returns and takes new messages: a
	// worker that sleeps holds a unit of the queue's concurrency, and
	// other jobs' slots pass while they wait for it.
	MaxHold time.Duration
	// MaxFailures bounds the pushes of one job in a row that fail
	// transiently; the next failure dead-letters what it carries, with
	// the reason. Each failed push defers the job FailureBackoff·2^(k−1)
	// for its k-th failure (at least what the vendor asked for, at most
	// SQS's 15 minutes), so a vendor that keeps failing is asked less and
	// less often rather than drained of a token every few seconds.
	MaxFailures    int
	FailureBackoff time.Duration
	// MaxAge and MaxDeferrals bound every job's life where its route sets
	// no bound of its own: a job first seen MaxAge ago, or about to be
	// deferred for the (MaxDeferrals+1)-th time, is dead-lettered as
	// Expired instead. Failures alone cannot loop (MaxFailures), but
	// everything else that defers can: a store that stays down, a lane
	// rechecked again and again, a bucket booked beyond MaxReserve for
	// good.
	MaxAge       time.Duration
	MaxDeferrals int
}

// DefaultPolicy is the policy DESIGN.md describes.
var DefaultPolicy = Policy{
	BlockThreshold: time.Second,
	Grace:          2 * time.Second,
	MaxReserve:     queue.MaxDelay,
	StoreCooldown:  10 * time.Second,
	DeadlineMargin: 3 * time.Second,
	LateRatio:      0.1,
	MaxHold:        2 * time.Second,
	MaxFailures:    8,
	FailureBackoff: 2 * time.Second,
	// A day: a push of state that old is still the newest state, but a
	// job that has not got out in a day needs an operator, not retries.
	MaxAge: 24 * time.Hour,
	// A healthy job is deferred a few times (its linger, its slot, an
	// early return). 200 rides out about half an hour of limiter-store
	// outage at the 10 s StoreCooldown, and stops a job that loops every
	// few seconds within minutes rather than a day.
	MaxDeferrals: 200,
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
	case p.StoreCooldown <= 0 || p.StoreCooldown > queue.MaxDelay:
		return fmt.Errorf("dispatch policy: StoreCooldown is %v, want in (0, %v]", p.StoreCooldown, queue.MaxDelay)
	case p.DeadlineMargin < 0:
		return fmt.Errorf("dispatch policy: DeadlineMargin is %v, want ≥ 0", p.DeadlineMargin)
	case p.MaxFailures < 1:
		return fmt.Errorf("dispatch policy: MaxFailures is %d, want ≥ 1", p.MaxFailures)
	case p.FailureBackoff <= 0:
		return fmt.Errorf("dispatch policy: FailureBackoff is %v, want > 0", p.FailureBackoff)
	case p.MaxHold <= 0:
		return fmt.Errorf("dispatch policy: MaxHold is %v, want > 0", p.MaxHold)
	case !(p.LateRatio >= 0 && p.LateRatio < 0.5):
		return fmt.Errorf("dispatch policy: LateRatio is %v, want in [0, 0.5)", p.LateRatio)
	case p.MaxAge <= 0:
		return fmt.Errorf("dispatch policy: MaxAge is %v, want > 0 (DefaultPolicy has 24h)", p.MaxAge)
	case p.MaxDeferrals < 1:
		return fmt.Errorf("dispatch policy: MaxDeferrals is %d, want ≥ 1 (DefaultPolicy has %d)", p.MaxDeferrals, DefaultPolicy.MaxDeferrals)
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
	// Expired: past its max age or max deferrals, dead-lettered with a
	// reason that starts "expired: ".
	Expired Outcome = "expired"
	// Coalesced: the job had nothing to send: a duplicate delivery, or
	// work that another job carries (Work.Begin said ErrNothingToPush).
	Coalesced Outcome = "coalesced"
)

// Result describes one handled job. Whatever the outcome, the message it
// came in is done with and may be deleted.
type Result struct {
	JobID string
	// Bucket is the key of the bucket the job draws from.
	Bucket  string
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
	// before it ran, or held by a job then shed or dead-lettered. They
	// waste quota but never overspend it.
	WastedSlots int
	// Pushes counts the requests the vendor accepted while handling the
	// job: a lane with more pending may push again in the same call.
	Pushes int
	// Items counts what those pushes carried (Payload.Items).
	Items int
	// Lateness is how long after its due time a deferred job was
	// delivered (negative: early); zero for a job not deferred.
	Lateness time.Duration
	// Delayed is the delay that deferral asked for.
	Delayed time.Duration
	// ShadowWouldDefer and ShadowWouldShed say what enforcement would have
	// done with a push of a Shadow route that went out at once: defer it
	// (its slot lay beyond blocking distance, or no slot within
	// MaxReserve) or shed it (no slot before its deadline). ShadowWait is
	// how long it would have waited for its slot (the longest, over the
	// jobs of one call).
	ShadowWouldDefer, ShadowWouldShed bool
	ShadowWait                        time.Duration
	// LocalShares counts pushes paced by the local share while the store
	// was unreachable.
	LocalShares int
	// CredentialRefused: the vendor refused the route's credential (401,
	// 403) and no new token replaced it; the route's bucket is paused and
	// the job kept (or, past MaxFailures, dead-lettered with its work
	// kept pending). An operator must fix the credential.
	CredentialRefused bool
	// Warnings counts the warnings vendors sent with accepted requests
	// (Message.Judge), Refused the changes the vendor refused and that
	// were dead-lettered alone, and Isolation the extra requests spent
	// taking refused messages apart to find them (Isolator).
	Warnings, Refused, Isolation int
}

// Dispatcher handles jobs. Its fields are its dependencies; all are required
// except Render, Now, Sleep and Log.
type Dispatcher struct {
	Routes  Router
	Limiter Reserver
	Pusher  Pusher
	Queue   Queue
	Policy  Policy
	// Work, if set, supplies what a job pushes at its slot and settles it
	// after (sdk/pipeline/syncer's lanes, whose claims fence duplicates); without it
	// a job pushes its payload.
	Work Work
	// Fence, if set, makes a payload job push once however many copies of
	// it the queues deliver (SQS is at-least-once; a send retried after its
	// answer was lost is a second message): each copy asks before pushing,
	// at one write each, under the job's Identity and try, so copies that
	// each booked a slot of their own still push once.
	Fence Fence
	// LocalShare paces LocalShare routes while the limiter store is
	// unreachable; it must be sized for the fleet's maximum number of
	// processes (fallback.New).
	LocalShare *fallback.Pacer
	Now        func() time.Time
	Sleep      func(ctx context.Context, d time.Duration) error
	// Jitter, if set, replaces the uniformly random delay in [0, max]
	// by which a job that a booking horizon denied retries after its
	// wait (tests make it deterministic).
	Jitter func(max time.Duration) time.Duration
	Log    *slog.Logger

	// Leases holds the in-flight leases of InFlight routes (lease.go).
	Leases *Leases

	late lateness
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

// HandleJob applies the policy to one job and, for state-backed work, to
// the jobs its pushes hand back. The Result is the last job's outcome, with
// the counters of all of them.
func (d *Dispatcher) HandleJob(ctx context.Context, j job.Job) (Result, error) {
	route, err := d.Routes.Route(j)
	var later *RouteUnavailableError
	if errors.As(err, &later) {
		return d.routeUnavailable(ctx, j, later)
	}
	if err != nil {
		return d.deadLetter(ctx, j, DeadLettered, "unroutable: "+err.Error())
	}
	now := d.now()
	var first Result
	if !j.Due.IsZero() {
		first.Lateness, first.Delayed = now.Sub(j.Due), j.Due.Sub(j.DeferredAt)
		d.late.observe(first.Lateness, first.Delayed)
	}
	ctx = withHold(ctx, now.Add(d.Policy.MaxHold))
	acc := first
	for {
		res, next, err := d.serve(ctx, j, route, now)
		acc = acc.then(res)
		acc.Bucket = route.Bucket.Key
		if err != nil || next == nil {
			return acc, err
		}
		j, now = *next, d.now()
	}
}

// then is r followed by next: next's outcome, both counters.
func (r Result) then(next Result) Result {
	next.Attempts += r.Attempts
	next.Throttled += r.Throttled
	next.WastedSlots += r.WastedSlots
	next.Pushes += r.Pushes
	next.Items += r.Items
	next.StoreError = next.StoreError || r.StoreError
	next.ShadowWouldDefer = next.ShadowWouldDefer || r.ShadowWouldDefer
	next.ShadowWouldShed = next.ShadowWouldShed || r.ShadowWouldShed
	next.ShadowWait = max(next.ShadowWait, r.ShadowWait)
	next.LocalShares += r.LocalShares
	next.CredentialRefused = next.CredentialRefused || r.CredentialRefused
	next.Warnings += r.Warnings
	next.Refused += r.Refused
	next.Isolation += r.Isolation
	next.Lateness, next.Delayed = r.Lateness, r.Delayed
	if next.JobID == "" {
		next.JobID = r.JobID
	}
	return next
}

// serve takes one job from its slot (or lack of one) to a push, a deferral
// or a shed. next is the job a push handed back, if any.
func (d *Dispatcher) serve(ctx context.Context, j job.Job, route Route, now time.Time) (Result, *job.Job, error) {
	if !j.NotBefore.IsZero() && now.Before(j.NotBefore) {
		// Not due yet: a chained wait past SQS's maximum delay, or work
		// that collects changes for a moment before its push. A short
		// wait is slept here; the slot is booked after it, as late as
		// possible.
		wait := j.NotBefore.Sub(now)
		switch {
		case d.lingerSlot(ctx, &j, route, now):
			// Its bucket fills up before the linger ends: the push takes
			// the slot it booked rather than let the bucket lose tokens.
			now = d.now()
		case wait > d.lead(wait) || !d.canSleep(ctx, wait):
			res, err := d.deferJob(ctx, j, route, wait, "not due yet")
			return res, nil, err
		default:
			if err := d.sleep(ctx, wait); err != nil {
				return Result{}, nil, err
			}
			j.NotBefore, now = time.Time{}, d.now()
		}
	}
	// Checked after the wait for NotBefore, which may cross it; a job
	// that is deferred instead meets the same bound in deferJob.
	if maxAge, _ := d.lifetime(route); !now.Before(j.FirstSeen.Add(maxAge)) {
		res, err := d.deadLetter(ctx, j, Expired, fmt.Sprintf("expired: first seen %s, over its max_age %s ago", j.FirstSeen.Format(time.RFC3339), maxAge))
		return res, nil, err
	}
	if !j.Deadline.IsZero() && !now.Before(j.Deadline) {
		res, err := d.deadLetter(ctx, j, Shed, fmt.Sprintf("deadline %s passed before the push", j.Deadline.Format(time.RFC3339)))
		return res, nil, err
	}
	if j.Slot.IsZero() && d.rechecks(j) {
		// Find out before booking a slot: a job told to come back again
		// would leave it unused.
		owned, res, err := d.recheck(ctx, j, route)
		if owned == nil {
			return res, nil, err
		}
		j, now = *owned, d.now()
	}
	wasted := 0
	if !j.Slot.IsZero() && now.After(j.Slot.Add(d.grace(route.Bucket.Limit))) {
		d.log().Info("reserved slot expired; re-acquiring", "job_id", j.ID, "slot", j.Slot, "late", now.Sub(j.Slot))
		j.Slot, j.SlotKey, wasted = time.Time{}, "", 1
	}
	var pre Result // what the reservation records of a job it lets through
	if j.Slot.IsZero() {
		res, done, err := d.reserve(ctx, &j, route, now)
		if done || err != nil {
			res.WastedSlots += wasted
			return res, nil, err
		}
		pre, now = res, d.now()
	}
	wait := j.Slot.Sub(now)
	if route.Shadow {
		// Enforcement would sleep or defer here; shadow mode records which
		// and pushes now. The booked slot stays in the bucket, so the
		// bucket shows the pace enforcement would keep.
		if wait > 0 {
			pre.ShadowWait = max(pre.ShadowWait, wait)
			pre.ShadowWouldDefer = pre.ShadowWouldDefer || wait > d.lead(wait) || !d.canSleep(ctx, wait)
		}
		res, next, err := d.push(ctx, j, route)
		res = pre.then(res)
		res.WastedSlots += wasted
		return res, next, err
	}
	if lead := d.lead(wait); wait > lead || !d.canSleep(ctx, wait) {
		// Come back once the slot is within blocking distance, and sleep
		// the rest. SQS delays are whole seconds and deliveries run late
		// (in proportion to the delay on the emulator, by seconds under a
		// scaling event source mapping), so the job comes back early by
		// the lateness seen, never less than BlockThreshold; a wait that
		// lateness alone could eat is slept here instead.
		res, err := d.deferJob(ctx, j, route, max(wait-lead, 0), "waiting for its reserved slot")
		res.WastedSlots += wasted
		return res, nil, err
	}
	// A stamped slot is confirmed ConfirmAfter before it comes, so that the
	// read's latency does not delay the push past its slot: late pushes
	// bunch at the vendor.
	early := time.Duration(0)
	if jobStamp(j) != nil {
		early = limiter.ConfirmAfter
	}
	if wait > early {
		if err := d.sleep(ctx, wait-early); err != nil {
			return Result{}, nil, err
		}
	}
	if revoked, err := d.revoked(ctx, j, route); revoked {
		// A throttle since the slot was booked lowered the rate below the
		// one it was booked at, or asked for silence past it (or the
		// store cannot say). Book again rather than earn a 429.
		d.log().Info("slot revoked by a throttle; re-acquiring", "job_id", j.ID, "slot", j.Slot, "err", err)
		j.Slot, j.SlotKey = time.Time{}, ""
		markStamp(&j, nil, 0)
		res, next, err := d.serve(ctx, j, route, d.now())
		return pre.then(res), next, err
	}
	if rest := j.Slot.Sub(d.now()); rest > 0 {
		if err := d.sleep(ctx, rest); err != nil {
			return Result{}, nil, err
		}
	}
	res, next, err := d.push(ctx, j, route)
	res = pre.then(res)
	res.WastedSlots += wasted
	return res, next, err
}

// lifetime is how long route's jobs live and how often they may be
// deferred: the route's bounds, or the policy's where it sets none.
func (d *Dispatcher) lifetime(route Route) (maxAge time.Duration, maxDeferrals int) {
	maxAge, maxDeferrals = route.MaxAge, route.MaxDeferrals
	if maxAge <= 0 {
		maxAge = d.Policy.MaxAge
	}
	if maxDeferrals <= 0 {
		maxDeferrals = d.Policy.MaxDeferrals
	}
	return maxAge, maxDeferrals
}

// lead is how early a deferral of wait comes back.
func (d *Dispatcher) lead(wait time.Duration) time.Duration {
	return max(d.Policy.BlockThreshold, d.late.lead(wait, d.Policy.LateRatio))
}

// contendedRetries bounds the prompt retries of a reservation whose writes
// all lost races: contention is not exhaustion, and the bucket may well
// have a slot for the next attempt.
const contendedRetries = 3

// reserve books a slot for j, bounded by its deadline. done reports that
// the job was disposed of (shed or deferred) instead.
func (d *Dispatcher) reserve(ctx context.Context, j *job.Job, route Route, now time.Time) (Result, bool, error) {
	maxDelay, bound := d.Policy.MaxReserve, noBound
	if route.Horizon > 0 {
		maxDelay = min(maxDelay, route.Horizon)
	}
	if !j.Deadline.IsZero() && j.Deadline.Sub(now) <= maxDelay {
		maxDelay, bound = j.Deadline.Sub(now), deadlineBound
	}
	maxAge, _ := d.lifetime(route)
	if left := j.FirstSeen.Add(maxAge).Sub(now); left < maxDelay {
		maxDelay, bound = left, maxAgeBound
	}
	if maxDelay < 0 {
		// The bound passed while the job slept for a horizon's next
		// token: no slot can come before it.
		res, err := d.unbookable(ctx, *j, bound, maxAge, now.Add(maxDelay))
		return res, true, err
	}
	if route.Quota != nil {
		return d.takeQuota(ctx, j, route, bound, maxAge)
	}
	tokens := slotTokens(route, *j)
	n := min(tokens+d.pendingLocal(route), max(route.Bucket.Limit.Burst, tokens))
	slot, key, stamp, err := d.reserveRoute(ctx, route, n, maxDelay)
	for try := 0; try < contendedRetries && errors.Is(err, limiter.ErrContended); try++ {
		if err := d.sleep(ctx, time.Duration(rand.Int64N(int64(20*time.Millisecond)))); err != nil {
			return Result{}, true, err
		}
		slot, key, stamp, err = d.reserveRoute(ctx, route, n, maxDelay)
	}
	if err == nil {
		j.Slot, j.SlotKey, j.Tokens = slot, key, tokens
		markStamp(j, stamp, slot.Sub(now))
		d.drainLocal(route, now)
		return Result{}, false, nil
	}
	if route.Shadow && !errors.Is(err, limiter.ErrInvalidArgument) && ctx.Err() == nil {
		return d.shadowRefused(j, route, err, bound != noBound, now)
	}
	if wait, denied := limiter.RetryAfter(err); denied && wait > 0 && route.Horizon > 0 && bound == noBound {
		// A horizon's denial is short (the next free token): wait for it
		// here, within the call's hold, rather than a trip through the
		// queue; the retry contends afresh, and urgent pushes go first.
		// Jobs denied together are told the same wait, and would all
		// retry at once for one token, each retry a write: each wakes at
		// a random point of the interval after it instead. That costs no
		// quota: the bucket is then short of its share, not full, and
		// keeps what it accrues until a retry takes it.
		if wait += d.spread(route); d.canSleep(ctx, wait) {
			if err := d.sleep(ctx, wait); err != nil {
				return Result{}, true, err
			}
			return d.reserve(ctx, j, route, d.now())
		}
	}
	if wait, denied := limiter.RetryAfter(err); denied {
		if bound != noBound {
			res, err := d.unbookable(ctx, *j, bound, maxAge, now.Add(maxDelay))
			return res, true, err
		}
		// Even MaxReserve (or the route's horizon) ahead is booked: come
		// back when it is not.
		res, err := d.deferJob(ctx, *j, route, wait, "bucket booked beyond the booking horizon")
		return res, true, err
	}
	if errors.Is(err, limiter.ErrContended) {
		res, err := d.deferJob(ctx, *j, route, 0, "bucket contended; retrying")
		return res, true, err
	}
	if errors.Is(err, limiter.ErrInvalidArgument) {
		res, err := d.deadLetter(ctx, *j, DeadLettered, "route has an invalid limit: "+err.Error())
		return res, true, err
	}
	if ctx.Err() != nil {
		return Result{}, true, ctx.Err()
	}
	if route.LocalShare && d.LocalShare != nil && errors.Is(err, limiter.ErrUnavailable) {
		return d.localShare(ctx, j, route, now, err)
	}
	cooldown := d.Policy.StoreCooldown
	var open *breaker.OpenError
	if errors.As(err, &open) {
		cooldown = max(cooldown, open.RetryAfter)
	}
	d.log().Warn("limiter store unavailable; deferring (fail closed)", "job_id", j.ID, "bucket", route.Bucket.Key, "err", err)
	res, derr := d.deferJob(ctx, *j, route, cooldown, "limiter store unavailable")
	res.StoreError = true
	return res, true, derr
}

// unbookable ends j, which has no slot before its bound (its deadline, or
// its max age that ends at end): shed or expired, with no token spent.
func (d *Dispatcher) unbookable(ctx context.Context, j job.Job, bound int, maxAge time.Duration, end time.Time) (Result, error) {
	if bound == deadlineBound {
		return d.deadLetter(ctx, j, Shed, "no slot before the deadline "+j.Deadline.Format(time.RFC3339)+"; no token spent")
	}
	return d.deadLetter(ctx, j, Expired, fmt.Sprintf("expired: no slot before its max_age %s ends at %s; no token spent", maxAge, end.Format(time.RFC3339)))
}

// What bounds a reservation below MaxReserve: the job's deadline (past it
// the job is shed) or its max age (past it the job expires).
const (
	noBound = iota
	deadlineBound
	maxAgeBound
)

// shadowRefused lets a Shadow route's job through when the reservation
// failed, recording what enforcement would have done: shed it (no slot
// before its deadline), defer it (no slot within MaxReserve, contention,
// or the store unreachable).
func (d *Dispatcher) shadowRefused(j *job.Job, route Route, err error, bounded bool, now time.Time) (Result, bool, error) {
	res := Result{ShadowWouldDefer: true}
	if wait, denied := limiter.RetryAfter(err); denied {
		res.ShadowWait = wait
		if bounded {
			res.ShadowWouldDefer, res.ShadowWouldShed = false, true
		}
	} else if !errors.Is(err, limiter.ErrContended) {
		res.StoreError = true
		d.log().Warn("limiter store unavailable; shadow route pushes anyway", "job_id", j.ID, "bucket", route.Bucket.Key, "err", err)
	}
	// No slot is held: the push goes out now, as the integration did
	// before fleetbucket.
	j.Slot, j.SlotKey = now, firstShard(route)
	markStamp(j, nil, 0)
	return res, false, nil
}

// localShare handles a LocalShare route's job while the limiter store is
// unreachable: a token of this process's share now, or soon enough to
// sleep for, lets it through with that time as its slot; otherwise it is
// deferred until the share has one (but not longer than StoreCooldown,
// when the store may be back).
func (d *Dispatcher) localShare(ctx context.Context, j *job.Job, route Route, now time.Time, storeErr error) (Result, bool, error) {
	maxWait := d.Policy.BlockThreshold
	if !d.canSleep(ctx, maxWait) {
		maxWait = 0
	}
	// A push of items pays for each of them locally too; the tokens a
	// slot of the shared bucket held before the outage are gone with it.
	n := d.localTokens(route, *j)
	delay, ok := d.LocalShare.ReserveN(route.buckets(), n, now, maxWait)
	if ok {
		j.Slot, j.SlotKey, j.Tokens = now.Add(delay), firstShard(route), n
		markStamp(j, nil, 0)
		return Result{StoreError: true, LocalShares: 1}, false, nil
	}
	wait := min(max(delay, time.Second), d.Policy.StoreCooldown)
	d.log().Info("limiter store unavailable and the local share is spent; deferring", "job_id", j.ID, "bucket", route.Bucket.Key, "wait", wait, "err", storeErr)
	res, err := d.deferJob(ctx, *j, route, wait, "limiter store unavailable; local share spent")
	res.StoreError = true
	return res, true, err
}

// localTokens is what a local-share push of j books: its slot's tokens
// (its items' on an endpoint metered by items), at most the smallest burst
// of the route's local shares; charge shrinks the push to what they pay
// for.
func (d *Dispatcher) localTokens(route Route, j job.Job) int {
	n := slotTokens(route, j)
	for _, b := range route.buckets() {
		_, burst := d.LocalShare.Share(b.Limit)
		n = min(n, burst)
	}
	return max(n, 1)
}

// firstShard is the key a push of a sharded route draws from when it holds
// no slot of the shared bucket (shadow and local-share pushes).
func firstShard(route Route) string {
	if route.Sharded == nil {
		return ""
	}
	shards, err := route.Sharded.Buckets()
	if err != nil {
		return "" // pushBuckets reports it
	}
	return shards[0].Key
}

// pendingLocal is how many pushes this process made under its local share
// of route that the shared bucket has not booked: its first reservation
// after an outage books them with its own token, so that the bucket, full
// again, does not grant its burst on top of them. It is at most the
// smallest burst of the route's buckets (shards included) less one, the
// most one reservation can book.
func (d *Dispatcher) pendingLocal(route Route) int {
	if !route.LocalShare || d.LocalShare == nil {
		return 0
	}
	n := d.LocalShare.Pending(route.Bucket)
	bursts := route.buckets()
	if route.Sharded != nil {
		if shards, err := route.Sharded.Buckets(); err == nil {
			bursts = shards
		}
	}
	for _, b := range bursts {
		n = min(n, b.Limit.Burst-1)
	}
	return max(n, 0)
}

// drainLocal is called when the shared bucket granted route a slot that
// booked the local grants of an outage with it: the fleet spends the limit
// there again, and an outage starts this process's share from empty (see
// localshare).
func (d *Dispatcher) drainLocal(route Route, now time.Time) {
	if route.LocalShare && d.LocalShare != nil {
		d.LocalShare.Drain(route.buckets(), now)
	}
}

// reserveRoute books n tokens of every bucket of the route (of one shard,
// for a sharded route, whose key it returns), and the stamp of a slot an
// adaptive bucket granted (see limiter.Reservation.Stamp).
func (d *Dispatcher) reserveRoute(ctx context.Context, route Route, n int, maxDelay time.Duration) (time.Time, string, *limiter.Stamp, error) {
	switch {
	case route.Sharded != nil:
		sharder, ok := d.Limiter.(ShardReserver)
		if !ok {
			return time.Time{}, "", nil, &limiter.ArgumentError{Field: "route.sharded", Reason: fmt.Sprintf("the limiter (%T) cannot reserve in shards", d.Limiter)}
		}
		r, err := sharder.ReserveSharded(ctx, *route.Sharded, n, maxDelay)
		return r.Slot, r.Key, nil, err
	case len(route.Also) == 0:
		r, err := d.Limiter.Reserve(ctx, route.Bucket, n, maxDelay)
		return r.Slot, "", stampOf(r.Stamp()), err
	}
	multi, ok := d.Limiter.(MultiReserver)
	if !ok {
		return time.Time{}, "", nil, &limiter.ArgumentError{Field: "route.also", Reason: fmt.Sprintf("the limiter (%T) cannot reserve several buckets at once", d.Limiter)}
	}
	r, err := multi.ReserveMulti(ctx, route.buckets(), n, maxDelay)
	return r.Slot, "", nil, err
}

// pushBuckets is what a push of j draws from: the route's bucket or, for a
// sharded route, the shard its slot came from, with the other shards as
// siblings a 429 empties too.
func pushBuckets(route Route, j job.Job) (limiter.Bucket, []limiter.Bucket, error) {
	if route.Sharded == nil {
		return route.Bucket, nil, nil
	}
	shards, err := route.Sharded.Buckets()
	if err != nil {
		return limiter.Bucket{}, nil, err
	}
	for i, b := range shards {
		if b.Key == j.SlotKey {
			return b, append(append([]limiter.Bucket(nil), shards[:i]...), shards[i+1:]...), nil
		}
	}
	return limiter.Bucket{}, nil, fmt.Errorf("job %q holds a slot in %q, not a shard of %q (shards changed?)", j.ID, j.SlotKey, route.Sharded.Key)
}

// push sends j at its slot. With Work, the body is what the work has
// pending now, and after the vendor settles the push (accepted, or refused
// for good) the work may hand back the next job.
func (d *Dispatcher) push(ctx context.Context, j job.Job, route Route) (Result, *job.Job, error) {
	res := Result{JobID: j.ID, Slot: j.Slot}
	held := !j.Slot.IsZero()
	j, p, err := d.begin(ctx, j, route)
	if err != nil {
		res, err := d.beginFailed(ctx, j, route, res, held, err)
		return res, nil, err
	}
	res.JobID = j.ID // as the vendor sees it: Begin may have moved the job on
	bucket, siblings, err := pushBuckets(route, j)
	if err != nil {
		return d.workFailed(ctx, j, route, res, err)
	}
	if route.ItemWeight > 0 {
		var deferred *Result
		if p, deferred, err = d.charge(ctx, j, p, route, bucket); deferred != nil || err != nil {
			if deferred != nil {
				return *deferred, nil, err
			}
			return d.workFailed(ctx, j, route, res, err)
		}
	}
	ctx, release, ok, lres, err := d.lease(ctx, j, route)
	if !ok {
		return lres, nil, err
	}
	defer release()
	if len(p.Messages) > 0 {
		return d.pushMessages(ctx, j, route, bucket, siblings, p, res)
	}
	resp, err := d.Pusher.Push(ctx, otapush.Request{
		Bucket: bucket, Also: route.Also, Siblings: siblings, URL: route.URL, Header: route.Header, JobID: j.ID, Body: p.Body, Reserved: true, Slot: j.Slot,
		Tokens: attemptTokens(route, p), Reserve: route.Reserve, Horizon: route.Horizon,
		Stamp: jobStamp(j), Quota: route.Quota,
	})
	res.Attempts, res.Throttled = resp.Attempts, resp.Throttled
	if err != nil {
		return d.pushFailed(ctx, j, route, p, res, err)
	}
	res.Outcome, res.Pushes, res.Items = Pushed, 1, p.Items
	return d.done(ctx, j, route, p, res)
}

// begin returns what j pushes. A payload job first takes its fence: the
// key is the push (job.Identity) and its try, not its slot, since copies
// of one delivery may each have booked a slot of their own by now. Only
// the first copy to ask pushes; every later try of the job (a retry after
// a failed push) asks under the next number, since the job carries Tries
// on from here.
func (d *Dispatcher) begin(ctx context.Context, j job.Job, route Route) (job.Job, Payload, error) {
	if d.Work != nil {
		return d.Work.Begin(ctx, j)
	}
	if d.Fence != nil {
		// Copies come as long as the job lives.
		maxAge, _ := d.lifetime(route)
		first, err := d.Fence.First(ctx, fmt.Sprintf("%s@%d", j.Identity(), j.Tries), j.FirstSeen.Add(maxAge))
		if err != nil {
			return j, Payload{}, err
		}
		if !first {
			return j, Payload{}, fmt.Errorf("%w: another delivery of job %q (try %d) pushes", ErrNothingToPush, j.ID, j.Tries)
		}
		j.Tries++
	}
	return j, Payload{Body: j.Payload, Items: 1}, nil
}

// beginFailed handles a Work.Begin that handed back no push. held says
// whether j held a slot, which then goes unused (a wasted slot).
func (d *Dispatcher) beginFailed(ctx context.Context, j job.Job, route Route, res Result, held bool, err error) (Result, error) {
	wasted := 0
	if held {
		wasted = 1
	}
	var recheck *RecheckError
	switch {
	case errors.Is(err, ErrNothingToPush):
		res.Outcome, res.Reason = Coalesced, err.Error()
		return res, nil
	case errors.Is(err, ErrIdle):
		res.Outcome, res.Reason, res.WastedSlots = Coalesced, err.Error(), wasted
		return res, nil
	case errors.Is(err, job.ErrMalformed):
		return d.deadLetter(ctx, j, DeadLettered, err.Error())
	case errors.As(err, &recheck):
		def, err := d.deferJob(ctx, j, route, recheck.At.Sub(d.now()), recheck.Error())
		def.WastedSlots = wasted
		return def, err
	}
	res, _, err = d.workFailed(ctx, j, route, res, err)
	return res, err
}

// rechecks reports whether j only comes back to find out whether its work
// is its own (Rechecker).
func (d *Dispatcher) rechecks(j job.Job) bool {
	r, ok := d.Work.(Rechecker)
	return ok && r.Rechecks(j)
}

// recheck begins j, which holds no slot yet, to find out whether its work
// is its own. owned is j as the work's owner when it is; otherwise res is
// what became of j (deferred to look again, or ended), with no slot spent.
func (d *Dispatcher) recheck(ctx context.Context, j job.Job, route Route) (owned *job.Job, res Result, err error) {
	// What Begin rendered is not pushed: the slot comes later, and the
	// push begins again at it (one more claim, once per takeover).
	next, _, err := d.begin(ctx, j, route)
	if err == nil {
		return &next, Result{}, nil
	}
	res, err = d.beginFailed(ctx, next, route, Result{JobID: j.ID}, false, err)
	return nil, res, err
}

// done settles a push with the work and returns the work's next job.
func (d *Dispatcher) done(ctx context.Context, j job.Job, route Route, p Payload, res Result) (Result, *job.Job, error) {
	if d.Work == nil {
		return res, nil, nil
	}
	next, err := d.Work.Done(ctx, j, p)
	if err != nil {
		// The push went out; what it carried is still pending and will be
		// pushed again: the vendor gets the same state twice, never less.
		d.log().Warn("settling a push failed; the job comes back to retry", "job_id", j.ID, "err", err)
		j.Slot = time.Time{}
		def, derr := d.deferJob(ctx, j, route, d.Policy.StoreCooldown, "settling the push failed: "+err.Error())
		def.StoreError = true
		return res.then(def), nil, derr
	}
	return res, next, nil
}

// workFailed handles a Work.Begin that could not read its state: the slot
// is lost, and the job comes back after the store cooldown (fail closed).
func (d *Dispatcher) workFailed(ctx context.Context, j job.Job, route Route, res Result, err error) (Result, *job.Job, error) {
	if ctx.Err() != nil {
		return Result{}, nil, ctx.Err()
	}
	d.log().Warn("reading the job's work failed; deferring (fail closed)", "job_id", j.ID, "err", err)
	j.Slot = time.Time{}
	def, derr := d.deferJob(ctx, j, route, d.Policy.StoreCooldown, "reading its work failed: "+err.Error())
	def.StoreError, def.WastedSlots = true, 1
	return def, nil, derr
}

func (d *Dispatcher) pushFailed(ctx context.Context, j job.Job, route Route, p Payload, res Result, err error) (Result, *job.Job, error) {
	var perm *otapush.PermanentError
	var later *otapush.DeferError
	switch {
	case errors.As(err, &perm) && credentialRefused(perm.Status) &&
		j.Failures < d.Policy.MaxFailures && d.refreshed(j):
		// The token was rotated: the same push goes out again with the new
		// one, counted as a failure so that a token that keeps changing
		// cannot loop.
		j.Failures++
		j.Slot, j.SlotKey = time.Time{}, ""
		def, err := d.deferJob(ctx, j, route, 0, "credential refreshed after "+perm.Error())
		def.Attempts, def.Throttled = res.Attempts, res.Throttled
		return def, nil, err
	case errors.As(err, &perm) && credentialRefused(perm.Status) && j.Failures < d.Policy.MaxFailures:
		// The vendor refuses the credential itself and no new token
		// replaced it (a rotation gone wrong, a revoked key): every push
		// on it would be refused too. Its bucket pauses for the whole
		// fleet until the job's backoff ends, and the job keeps its work
		// for then: nothing is cleared while an operator fixes the
		// credential, and the refusal pages (CredentialRefused).
		j.Failures++
		wait := d.failureWait(j, 0)
		d.pause(ctx, route, d.now().Add(wait))
		j.Slot, j.SlotKey = time.Time{}, ""
		def, err := d.deferJob(ctx, j, route, wait, "credential refused, its pushes paused: "+perm.Error())
		def.Attempts, def.Throttled, def.CredentialRefused = res.Attempts, res.Throttled, true
		return def, nil, err
	case errors.As(err, &perm):
		// Refused for good: the same push cannot succeed. The job goes to
		// the dead-letter queue with the reason. State-backed work is not
		// settled but given up (Abandoner): what the push carried stays
		// pending, to be pushed again by the work's next job, and the job
		// in the dead letter names its work, so that a redrive pushes it
		// again once the cause is fixed.
		reason := perm.Error()
		if credentialRefused(perm.Status) {
			reason = fmt.Sprintf("credential refused %d times in a row: %v", j.Failures+1, perm)
		}
		j.Slot, j.SlotKey = time.Time{}, "" // spent on the push, not wasted
		dl, err := d.deadLetter(ctx, j, DeadLettered, reason)
		dl.Attempts, dl.Throttled, dl.CredentialRefused = res.Attempts, res.Throttled, credentialRefused(perm.Status)
		return dl, nil, err
	case errors.As(err, &later) && errors.Is(later, limiter.ErrUnavailable):
		// The limiter's store, not the vendor, failed: fail closed, and
		// do not count it against the job.
		j.Slot, j.SlotKey = time.Time{}, ""
		def, err := d.deferJob(ctx, j, route, d.Policy.StoreCooldown, later.Error())
		def.Slot, def.Attempts, def.Throttled, def.StoreError = res.Slot, res.Attempts, res.Throttled, true
		return def, nil, err
	case errors.As(err, &later) && j.Failures+1 > d.Policy.MaxFailures:
		// Given up, as a refusal is (above): the job is dead-lettered and
		// its work stays pending.
		reason := fmt.Sprintf("gave up after %d failed pushes in a row: %v", j.Failures+1, later)
		j.Slot, j.SlotKey = time.Time{}, ""
		dl, err := d.deadLetter(ctx, j, DeadLettered, reason)
		dl.Attempts, dl.Throttled = res.Attempts, res.Throttled
		return dl, nil, err
	case errors.As(err, &later):
		j.Failures++
		wait := d.failureWait(j, later.After)
		j.Slot, j.SlotKey = time.Time{}, "" // retries spent or lost it; the next run acquires afresh
		def, err := d.deferJob(ctx, j, route, wait, later.Error())
		def.Slot, def.Attempts, def.Throttled = res.Slot, res.Attempts, res.Throttled
		return def, nil, err
	}
	return Result{}, nil, err
}

// credentialRefused says a vendor's status refuses the credential.
func credentialRefused(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// failureWait is how long a job that failed j.Failures times in a row
// waits: FailureBackoff·2^(k−1), at least what the vendor asked for and a
// second, at most SQS's 15 minutes.
func (d *Dispatcher) failureWait(j job.Job, asked time.Duration) time.Duration {
	backoff := d.Policy.FailureBackoff << min(j.Failures-1, 20)
	return min(max(asked, time.Second, backoff), queue.MaxDelay)
}

// Penalizer is the part of *limiter.Limiter that empties a bucket for the
// whole fleet until a time; the dispatcher pauses a route whose credential
// the vendor refuses with it, where its Limiter has it.
type Penalizer interface {
	Penalize(ctx context.Context, b limiter.Bucket, until time.Time) error
}

// pause stops every worker's grants on route's bucket (every shard of a
// sharded one) until `until`.
func (d *Dispatcher) pause(ctx context.Context, route Route, until time.Time) {
	p, ok := d.Limiter.(Penalizer)
	if !ok {
		return // only this job waits
	}
	buckets := []limiter.Bucket{route.Bucket}
	if route.Sharded != nil {
		if shards, err := route.Sharded.Buckets(); err == nil {
			buckets = shards
		}
	}
	for _, b := range buckets {
		if err := p.Penalize(ctx, b, until); err != nil {
			d.log().Warn("could not pause a bucket whose credential the vendor refuses; other workers find out with their own push", "bucket", b.Key, "err", err)
		}
	}
}

// deferJob sends j back to the deferred queue, to return after wait. Work
// first extends its hold on what j carries to cover the wait; work that is
// no longer j's to push ends here instead.
func (d *Dispatcher) deferJob(ctx context.Context, j job.Job, route Route, wait time.Duration, reason string) (Result, error) {
	maxAge, maxDeferrals := d.lifetime(route)
	switch back := d.now().Add(wait); {
	case j.Deferrals >= maxDeferrals:
		return d.deadLetter(ctx, j, Expired, fmt.Sprintf("expired: %d deferrals, max_deferrals %d (was to be deferred: %s)", j.Deferrals, maxDeferrals, reason))
	case !back.Before(j.FirstSeen.Add(maxAge)):
		// It would come back expired: end it now, rather than hold its
		// work (and, for a lane, keep new changes from waking it) until
		// then.
		return d.deadLetter(ctx, j, Expired, fmt.Sprintf("expired: would be back at %s, past its max_age %s from %s (was to be deferred: %s)",
			back.Format(time.RFC3339), maxAge, j.FirstSeen.Format(time.RFC3339), reason))
	}
	if d.Work != nil {
		err := d.Work.Hold(ctx, j, d.now().Add(wait))
		if errors.Is(err, ErrNothingToPush) {
			return Result{JobID: j.ID, Outcome: Coalesced, Reason: "not deferred: " + err.Error(), Slot: j.Slot}, nil
		}
		if err != nil {
			// The job still comes back; if its hold lapses meanwhile, the
			// work's next change takes it over and this job then finds
			// nothing to push.
			d.log().Warn("could not extend the job's hold before deferring it", "job_id", j.ID, "err", err)
		}
	}
	if err := d.Queue.Defer(ctx, j, wait); err != nil {
		return Result{}, err
	}
	return Result{JobID: j.ID, Outcome: Deferred, Reason: reason, Wait: wait, Slot: j.Slot}, nil
}

// deadLetter sends j to the dead-letter queue with the reason. Work that
// can give up what j carries (Abandoner) does so first, so that the next
// job to take the work up finds it pending, rather than waiting for j's
// hold to lapse. A job whose work is no longer its own (a duplicate
// delivery) ends there, as a duplicate does everywhere else.
func (d *Dispatcher) deadLetter(ctx context.Context, j job.Job, o Outcome, reason string) (Result, error) {
	storeErr := false
	if a, ok := d.Work.(Abandoner); ok {
		err := a.Abandon(ctx, j)
		switch {
		case errors.Is(err, ErrNothingToPush):
			return Result{JobID: j.ID, Outcome: Coalesced, Reason: fmt.Sprintf("not %s (%s): %v", o, reason, err)}, nil
		case err != nil:
			// Dead-lettered all the same: the hold lapses by itself, and
			// the work's next change takes it over then.
			d.log().Warn("could not give up the dead-lettered job's work", "job_id", j.ID, "err", err)
			storeErr = true
		}
	}
	body, err := job.Encode(j)
	if err != nil {
		return Result{}, err
	}
	res, err := d.deadLetterBody(ctx, j.ID, body, o, reason)
	if !j.Slot.IsZero() {
		res.WastedSlots = 1
	}
	res.StoreError = storeErr
	return res, err
}

func (d *Dispatcher) deadLetterBody(ctx context.Context, id, body string, o Outcome, reason string) (Result, error) {
	if err := d.Queue.DeadLetter(ctx, body, reason); err != nil {
		return Result{}, err
	}
	d.log().Warn("job dead-lettered", "job_id", id, "outcome", string(o), "reason", reason)
	return Result{JobID: id, Outcome: o, Reason: reason}, nil
}

// refreshed asks the router to replace the job's credential token.
func (d *Dispatcher) refreshed(j job.Job) bool {
	r, ok := d.Routes.(CredentialRefresher)
	return ok && r.RefreshCredential(j)
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
// deadline (a Lambda invocation's end) and stays within the call's
// MaxHold.
func (d *Dispatcher) canSleep(ctx context.Context, wait time.Duration) bool {
	if wait <= 0 {
		return true
	}
	until := d.now().Add(wait)
	if hold, ok := ctx.Value(holdKey{}).(time.Time); ok && until.After(hold) {
		return false
	}
	deadline, ok := ctx.Deadline()
	return !ok || until.Add(d.Policy.DeadlineMargin).Before(deadline)
}

type holdKey struct{}

// withHold records when the call's hold ends, keeping an earlier end the
// caller set (WithHold).
func withHold(ctx context.Context, until time.Time) context.Context {
	if prev, ok := ctx.Value(holdKey{}).(time.Time); ok && prev.Before(until) {
		return ctx
	}
	return context.WithValue(ctx, holdKey{}, until)
}

// WithHold bounds how long jobs handled under ctx stay in process, below
// Policy.MaxHold: a job that would sleep past until is deferred instead.
// A worker that must get back to its queue quickly (the changes queue,
// whose messages wake idle lanes) handles its jobs under a short hold.
func WithHold(ctx context.Context, until time.Time) context.Context {
	return withHold(ctx, until)
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
