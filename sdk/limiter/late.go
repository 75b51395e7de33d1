package limiter

import (
	"fmt"
	"time"
)

// MaxLateGrants is how many grants in a row Wait and WaitMulti book and
// leave unspent because each came back later than its bucket's margin
// allows (Late) before they give up with a *LateGrantError: one late answer
// is a retried write, a throttled table or a GC pause; three say the store
// is slower than the margin, and booking more would only burn the fleet's
// tokens.
const MaxLateGrants = 3

// Late is how much later than limit l allows a request spending a slot
// leaves at now: 0 when it may leave, more when it must not (book again).
//
// The vendor counts a request when it arrives, d after its slot. Nothing
// leaves before its slot (d ≥ 0), so the arrivals in a vendor's window
// [t, t+W] have their slots in [t − d_max, t+W]: a window of W + d_max,
// which the bucket fills with at most b − r·m + r·(W + d_max) slots
// (docs/design.md, the margin). That is within the vendor's b + r·W exactly
// when d_max ≤ m. So a request is late when now − slot > m, whatever made
// it so: for a slot due at once (the `now` its write read) the store's
// latency, for a slot booked ahead the wake-up, and for either a grant
// answered after its slot has passed. A grant whose answer arrives at
// t0 + L for a slot at t0, L > m, would otherwise leave beside grants made
// since and answered fast, one of them possibly booked later and sent
// earlier. The check must be made as the request leaves, after any sleep
// or read that comes between.
//
// A limit with no margin keeps no refill free for any lateness, so every
// grant due at once would be late by its write's latency: Late is then
// always 0, and the vendor sees up to b + r·(W + d_max) (design.md).
func Late(l Limit, slot, now time.Time) time.Duration {
	if l.Margin <= 0 {
		return 0
	}
	return max(now.Sub(slot)-l.Margin, 0)
}

// lateMulti is Late for a slot of several buckets: the request reaches
// every bucket's vendor window, so the tightest margin binds.
func lateMulti(buckets []Bucket, slot, now time.Time) (time.Duration, Bucket) {
	var worst time.Duration
	var which Bucket
	for _, b := range buckets {
		if l := Late(b.Limit, slot, now); l > worst {
			worst, which = l, b
		}
	}
	return worst, which
}

// LateGrantError is a Wait (or WaitMulti, or a push) that booked Grants
// grants in a row, each of which came back, or reached its send, later
// than its bucket's margin allows, and spent none of them. It matches
// ErrUnavailable: the store answers too slowly to grant safely, so fail
// closed (defer the work) as for an outage. The grants stay charged.
type LateGrantError struct {
	Key    string
	Grants int
	// Slot is the last grant's slot, Late how far past Slot + Margin it
	// could first have been spent.
	Slot   time.Time
	Late   time.Duration
	Margin time.Duration
}

func (e *LateGrantError) Error() string {
	return fmt.Sprintf("fleetbucket: bucket %q: %d grant(s) in a row came back too late to spend, the last %v past its slot's margin of %v: the store answers slower than the margin; raise Limit.Margin to the store's latency, or look at the store",
		e.Key, e.Grants, e.Late, e.Margin)
}

func (e *LateGrantError) Is(target error) bool { return target == ErrUnavailable }
