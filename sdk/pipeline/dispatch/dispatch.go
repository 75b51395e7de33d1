package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/fallback"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
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
	// OneAsker: the route's jobs ask Bucket for a token at turns of the
	// whole fleet, one interval apart, booked in the bucket's ask queue
	// (askers.go). For routes that take only tokens free at once (a
	// resync's bulk pushes), whose jobs would otherwise all ask at every
	// free token, each ask a write.
	OneAsker bool
	// ItemWeight > 0 meters the endpoint by items, each ItemWeight tokens,
	// instead of by requests (connections' "cost": "items"; see charge).
	// It needs a single Bucket: no Also, no Sharded.
	ItemWeight float64
	// LocalShare: while the limiter store is unreachable, push within this
	// process's share of the limit rather than defer (connections'
	// "on_store_unavailable": "local-share"). It needs
	// Dispatcher.LocalShare and the KnownSilence capability; without them
	// the route fails closed.
	LocalShare bool
	// MaxAge and MaxDeferrals bound the life of the route's jobs
	// (connections' "max_age", "max_deferrals"); zero: the policy's.
	MaxAge       time.Duration
	MaxDeferrals int
	// InFlight, Quota: see lease.go, quota.go.
	InFlight *limiter.InFlight
	// Learn is the lease a push takes while the fleet has learned an
	// in-flight cap for the route's bucket (learncap.go): its Key, Hold
	// and Timeout, and, in Max, the most the configuration allows (the
	// lease set's MaxLeases where it names none). Nil: nothing is learned.
	Learn *limiter.InFlight
	Quota *limiter.QuotaBucket
}

// buckets is every bucket the route draws from, Bucket first.
func (r Route) buckets() []limiter.Bucket { return append([]limiter.Bucket{r.Bucket}, r.Also...) }

// ShardReserver books a slot in one shard of a sharded bucket
// (*limiter.Limiter's ReserveSharded); the dispatcher needs it for sharded
// routes.
type ShardReserver func(ctx context.Context, s limiter.ShardedBucket, n int, maxDelay time.Duration) (limiter.Reservation, error)

// MultiReserver books several buckets at once (*limiter.Limiter's
// ReserveMulti); the dispatcher needs it for routes with Also.
type MultiReserver func(ctx context.Context, buckets []limiter.Bucket, n int, maxDelay time.Duration) (limiter.MultiReservation, error)

// Fence tells the first of several deliveries of one job from the others
// (*limiter.Limiter's FirstAfter): first is true exactly once per key
// before until, fleet-wide, for a caller that passes the tags of its
// earlier unanswered writes (earlier) and keeps the tag it is handed back
// with an error.
type Fence func(ctx context.Context, key string, earlier []string, until time.Time) (first bool, tag string, err error)

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

// Dispatcher handles jobs. Its fields are its dependencies; all are required
// except Fence, LocalShare, Leases, Now, Sleep, Jitter, Log, Can and Needs.
// Build it with sdk/pipeline.New, or call Validate before its first job.
//
// Its callers resolve their jobs themselves and hand them over as Tasks
// (Run, Do): sdk/pipeline/syncer its lane jobs, with their lanes' work; a
// service that pushes payload jobs of its own, each with its route.
type Dispatcher struct {
	Limiter Reserver
	Pusher  Pusher
	Queue   Queue
	Policy  Policy
	// Fence, if set, makes a payload job push once however many copies of
	// it the queues deliver (SQS is at-least-once; a send retried after its
	// answer was lost is a second message): each copy asks before pushing,
	// at one write each, under the job's Identity and try, so copies that
	// each booked a slot of their own still push once. A service pushing
	// payload jobs of its own (Tasks with no Work) needs it; pipeline.New
	// leaves it unset, its lane jobs being fenced by their lane's claim.
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
	// Can is what the dispatcher can do beyond Reserve; zero: what its
	// Limiter can (CapabilitiesOf), read once when it is validated or
	// handles its first job. Needs is what its routes use, which Validate
	// checks Can against.
	Can   Capabilities
	Needs Needs

	once sync.Once

	// Leases holds the in-flight leases of InFlight routes (lease.go).
	Leases *Leases

	late lateness
	// prep learns how long beginning a job's work takes (decide's
	// PrepLead), granting how long a reservation takes to be answered
	// (reserveRoute's ahead): prep.go.
	prep, granting slowest
	// storeFailing: the limiter's store failed the last reservation
	// (reserveRoute), so jobs book before they begin their work.
	storeFailing atomic.Bool
	// took is the largest request each bucket's vendor accepted lately,
	// which a throttle of no larger a request does not halve (took.go).
	took taken
	// sending counts each bucket's requests at its vendor from this
	// process (learncap.go).
	sending sending
}

// init reads the dispatcher's capabilities, once, unless set.
func (d *Dispatcher) init() {
	d.once.Do(func() {
		if d.Can.none() {
			d.Can = CapabilitiesOf(d.Limiter)
		}
	})
}

// Validate checks the dispatcher is complete, at start-up.
func (d *Dispatcher) Validate() error {
	if d.Limiter == nil || d.Pusher == nil || d.Queue == nil {
		return errors.New("dispatch: Limiter, Pusher and Queue are all required")
	}
	d.init()
	if err := d.missing(); err != nil {
		return err
	}
	return d.Policy.Validate()
}

// Do applies the policy to one task and, for state-backed work, to the
// jobs its pushes hand back. The Result is the last job's outcome, with
// the counters of all of them. hold, if not zero and sooner than the
// policy's MaxHold, is when the call's hold ends: a job that would sleep
// past it is deferred instead (a worker that must get back to its queue
// quickly, the changes queue's, whose messages wake idle lanes).
func (d *Dispatcher) Do(ctx context.Context, t Task, hold time.Time) (Result, error) {
	d.init()
	j := t.Job
	var later *RouteUnavailableError
	if errors.As(t.Err, &later) {
		t.Route = later.Route
		return d.routeUnavailable(ctx, j, newTask(t, time.Time{}), later)
	}
	if t.Err != nil {
		return d.deadLetter(ctx, j, newTask(t, time.Time{}), DeadLettered, "unroutable: "+t.Err.Error())
	}
	if t.GiveUp != "" {
		return d.deadLetter(ctx, j, newTask(t, time.Time{}), DeadLettered, t.GiveUp)
	}
	now := d.now()
	var first Result
	if !j.Due.IsZero() {
		first.Lateness, first.Delayed = now.Sub(j.Due), j.Due.Sub(j.DeferredAt)
		d.late.observe(first.Lateness, first.Delayed)
	}
	if until := now.Add(d.Policy.MaxHold); hold.IsZero() || until.Before(hold) {
		hold = until
	}
	tk := newTask(t, hold)
	tk.InFlight = d.inFlight(tk)
	acc := first
	for handedBack := false; ; handedBack = true {
		res, next, err := d.serve(ctx, j, tk, now, handedBack)
		acc = acc.then(res)
		acc.Bucket, acc.Channel = t.Route.Bucket.Key, j.Channel
		if err != nil || next == nil {
			return acc, err
		}
		j, now = *next, d.now()
	}
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
