package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Capabilities are what a Dispatcher can do beyond Reserve, each of which
// some routes need. They are functions, set once when the dispatcher is
// built (CapabilitiesOf takes them from its Limiter's methods), never
// looked up while a job runs; nil: the dispatcher cannot. Validate refuses a dispatcher whose routes
// need one it lacks (Needs), rather than let a route do without in
// silence: a limiter without Confirm, say, would spend slots a throttle
// had revoked.
type Capabilities struct {
	// Shards books a slot in one shard of a Sharded route.
	Shards ShardReserver
	// Multi books a route's Also buckets with its Bucket.
	Multi MultiReserver
	// Batch books a batch's slots with one write per bucket (Run),
	// and a push's further items on an endpoint metered by items.
	Batch Booker
	// Confirm confirms a slot an adaptive bucket granted ahead before it
	// is spent.
	Confirm Confirmer
	// Penalize pauses a bucket, for the whole fleet, whose credential the
	// vendor refuses; without it only the job that met the refusal waits.
	Penalize Penalizer
	// Silence tells whether a slot booked ahead lies inside a silence a
	// vendor asked since (a 429's Retry-After); without it such a slot is
	// spent whatever a 429 asked after its booking.
	Silence Silencer
	// KnownSilence tells, with no store call, whether a silence this
	// process learned lies over a bucket: a LocalShare route pushes within
	// its share while the store is down only outside one.
	KnownSilence KnownSilencer
	// Quota takes a route's tokens and its calendar quota in one
	// transaction; QuotaAlone takes the quota alone, for a slot held.
	Quota      QuotaTaker
	QuotaAlone QuotaAloneTaker
	// Ahead books a slot with its write claiming a later now, so that a
	// slow store's answer comes before the slot; without it a slot due at
	// once is late by the grant's latency.
	Ahead AheadReserver
	// Caps learns the in-flight cap of a vendor that takes only so many
	// requests at once and says so only in its 429s (learncap.go); without
	// it a route leases only as its configuration says.
	Caps CapLearner
	// Spacing is the factor a bucket on probation spaces its slots by (a
	// vendor that refused its first requests after a silence): a request
	// on an endpoint metered by items is sized to its capacity divided by
	// it; without it, to the whole capacity.
	Spacing func(b limiter.Bucket) int64
}

// none reports whether c has no capability set.
func (c Capabilities) none() bool {
	return c.Shards == nil && c.Multi == nil && c.Batch == nil && c.Confirm == nil && c.Penalize == nil &&
		c.Silence == nil && c.KnownSilence == nil && c.Quota == nil && c.QuotaAlone == nil && c.Ahead == nil && c.Caps == nil && c.Spacing == nil
}

// CapabilitiesOf is what reserver (a Dispatcher's Limiter) can do, read
// once: each capability is its method of that name. *limiter.Limiter has
// every one.
func CapabilitiesOf(reserver Reserver) Capabilities {
	var c Capabilities
	if l, ok := reserver.(interface {
		ReserveSharded(ctx context.Context, s limiter.ShardedBucket, n int, maxDelay time.Duration) (limiter.Reservation, error)
	}); ok {
		c.Shards = l.ReserveSharded
	}
	if l, ok := reserver.(interface {
		ReserveMulti(ctx context.Context, buckets []limiter.Bucket, n int, maxDelay time.Duration) (limiter.MultiReservation, error)
	}); ok {
		c.Multi = l.ReserveMulti
	}
	if l, ok := reserver.(interface {
		ReserveBatch(ctx context.Context, b limiter.Bucket, req limiter.BatchRequest) (limiter.Batch, error)
	}); ok {
		c.Batch = l.ReserveBatch
	}
	if l, ok := reserver.(interface {
		Confirm(ctx context.Context, b limiter.Bucket, s limiter.Stamp) (bool, error)
	}); ok {
		c.Confirm = l.Confirm
	}
	if l, ok := reserver.(interface {
		Penalize(ctx context.Context, b limiter.Bucket, until time.Time) error
	}); ok {
		c.Penalize = l.Penalize
	}
	if l, ok := reserver.(interface {
		Silence(ctx context.Context, b limiter.Bucket) (time.Time, error)
	}); ok {
		c.Silence = l.Silence
	}
	if l, ok := reserver.(interface {
		KnownSilence(b limiter.Bucket) time.Time
	}); ok {
		c.KnownSilence = l.KnownSilence
	}
	if l, ok := reserver.(interface {
		TakeWithQuota(ctx context.Context, buckets []limiter.Bucket, q limiter.QuotaBucket, n int, id string) (limiter.MultiReservation, error)
		TakeQuota(ctx context.Context, q limiter.QuotaBucket, n int, id string) (limiter.QuotaGrant, error)
	}); ok {
		c.Quota, c.QuotaAlone = l.TakeWithQuota, l.TakeQuota
	}
	if l, ok := reserver.(interface {
		ReserveAhead(ctx context.Context, b limiter.Bucket, n int, maxDelay, ahead time.Duration) (limiter.Reservation, error)
	}); ok {
		c.Ahead = l.ReserveAhead
	}
	if l, ok := reserver.(CapLearner); ok {
		c.Caps = l
	}
	if l, ok := reserver.(interface{ Spacing(b limiter.Bucket) int64 }); ok {
		c.Spacing = l.Spacing
	}
	return c
}

// Needs are the capabilities a dispatcher's routes use, declared when it
// is built (pipeline.New derives them from the channel config), so that
// Validate can check them before the first job rather than at it.
type Needs struct {
	// Sharded: a route has Sharded (a hot key's shards).
	Sharded bool
	// Multi: a route has Also (an extra window, a property's share).
	Multi bool
	// Items: a route is metered by items (ItemWeight).
	Items bool
	// Adaptive: a route's bucket is adaptive (Bucket.Adaptive).
	Adaptive bool
	// LocalShare: a route pushes within a local share while the store is
	// down (Route.LocalShare).
	LocalShare bool
	// Quota: a route has a calendar quota (Route.Quota).
	Quota bool
	// InFlight: a route caps its requests in flight (Route.InFlight).
	InFlight bool
}

// Or is what n and m need together.
func (n Needs) Or(m Needs) Needs {
	return Needs{Sharded: n.Sharded || m.Sharded, Multi: n.Multi || m.Multi, Items: n.Items || m.Items,
		Adaptive: n.Adaptive || m.Adaptive, LocalShare: n.LocalShare || m.LocalShare, Quota: n.Quota || m.Quota, InFlight: n.InFlight || m.InFlight}
}

// missing names, one per line of the error, each capability d's Needs use
// and its Capabilities lack.
func (d *Dispatcher) missing() error {
	n, c := d.Needs, d.Can
	var errs []string
	add := func(need bool, have bool, what string) {
		if need && !have {
			errs = append(errs, what)
		}
	}
	add(n.Sharded, c.Shards != nil, fmt.Sprintf("a route is sharded, and the limiter (%T) cannot reserve in shards (ReserveSharded)", d.Limiter))
	add(n.Multi, c.Multi != nil, fmt.Sprintf("a route draws on several buckets (limits, property_share), and the limiter (%T) cannot reserve them together (ReserveMulti)", d.Limiter))
	add(n.Items, c.Batch != nil, fmt.Sprintf("a route is metered by items, and the limiter (%T) cannot book a push's further items (ReserveBatch)", d.Limiter))
	add(n.Adaptive, c.Confirm != nil, fmt.Sprintf("a route's bucket is adaptive, and the limiter (%T) cannot confirm a slot granted ahead (Confirm): its pushes would spend slots a throttle revoked", d.Limiter))
	add(n.LocalShare, d.LocalShare != nil, "a route pushes within a local share while the store is down (on_store_unavailable: local-share), and Dispatcher.LocalShare is nil: set it (fallback.New)")
	add(n.LocalShare, c.KnownSilence != nil, fmt.Sprintf("a route pushes within a local share while the store is down, and the limiter (%T) cannot tell the silences it learned with no store call (KnownSilence): its pushes would ignore a 429's Retry-After", d.Limiter))
	add(n.Quota, c.Quota != nil, fmt.Sprintf("a route has a calendar quota, and the limiter (%T) cannot take one with its tokens (TakeWithQuota)", d.Limiter))
	add(n.InFlight, d.Leases != nil, "a route has max_in_flight, and Dispatcher.Leases is nil: set it (dispatch.NewLeases(limiter.NewLeaseGate(lim)))")
	if len(errs) == 0 {
		return nil
	}
	return errors.New("dispatch: missing capabilities: use *limiter.Limiter, or set Dispatcher.Can:\n  " + strings.Join(errs, "\n  "))
}
