package dispatch

import (
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
)

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
	// dispatcher never sleeps into it, and a push's later messages end
	// where it begins (messages.go), so the push settles before the
	// invocation ends.
	DeadlineMargin time.Duration
	// LateRatio is how late, as a share of its delay, a deferred job may
	// come back; a deferral returns early by that share (never by less
	// than BlockThreshold) and sleeps the rest. The dispatcher raises it
	// to the lateness it observes. moto delivers about 6% late; an event
	// source mapping under scaling is late by seconds.
	LateRatio float64
	// MaxHold bounds how long one call keeps a job in process: sleeping
	// for a slot, or pushing the next job a push handed back. Past it, the
	// job is deferred (with its slot if it holds one; a job handed back
	// then is deferred before booking, on a shadow route too), so that an
	// invocation busy with a lane that keeps changing still returns and
	// takes new messages: a worker that sleeps or pushes holds a unit of
	// the queue's concurrency, and other jobs' slots pass while they wait
	// for it.
	MaxHold time.Duration
	// MaxFailures bounds the pushes of one job in a row that fail
	// transiently; the next failure dead-letters what it carries, with
	// the reason. Throttles are not such failures: a push throttled to its
	// end backs off as far as the job's failures so far, however often,
	// and MaxAge and MaxDeferrals end it. Each failed push defers the job FailureBackoff·2^(k−1)
	// for its k-th failure (at least what the vendor asked for, at most
	// SQS's 15 minutes), so a vendor that keeps failing is asked less and
	// less often rather than drained of a token every few seconds.
	MaxFailures    int
	FailureBackoff time.Duration
	// MaxAge and MaxDeferrals bound every job's life where its route sets
	// no bound of its own: a job first seen MaxAge ago, or about to be
	// deferred for the (MaxDeferrals+1)-th time, is dead-lettered as
	// Expired instead. Failures alone cannot loop (MaxFailures), but
	// everything else that defers can: a vendor that keeps throttling, a store that stays down, a lane
	// rechecked again and again, a bucket booked beyond MaxReserve for
	// good.
	MaxAge       time.Duration
	MaxDeferrals int
}

// DefaultPolicy is the policy docs/design.md describes.
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

// minGrace is lateness that is only this process's own latency (a slot
// booked "now" and used a few milliseconds later), never a late delivery:
// expiring slots on it would re-acquire every job of a small-burst bucket.
const minGrace = 100 * time.Millisecond

// grace is how late a job may use its slot under limit l, from the slot
// its grant's write claimed to the moment its request leaves. A bucket
// with a margin keeps that much refill free for requests that reach the
// vendor after their slots, so a job later than its margin books a new
// slot rather than arrive where the vendor's window counts it beside
// slots granted since (docs/design.md, the margin): the margin, at most
// half the burst's refill, and never under minGrace, the process's own
// latency.
//
// A bucket with no margin keeps nothing free: half the burst's refill,
// the (b−1)/2 requests over b + r·W that design.md allows it, but never
// under one emission interval T rather than minGrace. minGrace is several
// intervals of a fast bucket with a small burst, and a slot spent that
// late meets as many slots granted since: at 20/s with a burst of 1 (two
// intervals), three requests reached the vendor within 50 ms (adversary
// seed 21). One interval late, the arrivals in a vendor's window
// [t, t+W] have their slots in [t − T, t+W], at most b + 1 + r·W: the one
// request over that a write's own latency may put there (design.md, clock
// skew).
func (d *Dispatcher) grace(l limiter.Limit) time.Duration {
	slack := time.Duration(int64(l.Burst-1)*l.Interval()/2) * time.Microsecond
	if l.Margin <= 0 {
		return min(d.Policy.Grace, max(slack, time.Duration(l.Interval())*time.Microsecond))
	}
	return min(d.Policy.Grace, max(min(slack, l.Margin), minGrace))
}
