package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// What becomes of a job refused on its way: by the vendor (decideFailure),
// by its work (decideBegin), by the limiter (decideRefusal, decideQuota).
// Pure, as decide is (decide.go).

// failure is a push that failed, as decideFailure reads it.
type failure struct {
	Err      error
	Failures int // the job's failed pushes in a row before this one
	Policy   Policy
	// Refreshed: the task's Refresh replaced the credential's token since
	// the push; asked only when mayRefresh.
	Refreshed bool
	// CallEnded: the call's own context ended (the invocation's deadline,
	// or its caller gave up), not only the push's: nothing is left to act.
	CallEnded bool
}

// mayRefresh reports whether a new token for the credential would send the
// push again: the vendor refused the credential, and the job may fail again.
func (f failure) mayRefresh() bool {
	return refusedFor(f.Err, otapush.ScopeCredential) && f.Failures < f.Policy.MaxFailures
}

// refusedFor reports whether err is a vendor's refusal about scope.
func refusedFor(err error, scope otapush.Scope) bool {
	var perm *otapush.PermanentError
	return errors.As(err, &perm) && perm.Concerns() == scope
}

// decideFailure says what becomes of a job whose push failed; ok is false
// when the call itself ended (f.CallEnded), which the caller returns. A
// push whose own context ended while the call goes on ran out of its time
// (its lease's deadline): the vendor did not answer in time, a failed push
// like any other.
func decideFailure(f failure) (d decision, ok bool) {
	var perm *otapush.PermanentError
	var later *otapush.DeferError
	k := f.Failures + 1 // counting this one
	if f.CallEnded {
		return decision{}, false
	}
	if !errors.As(f.Err, &later) && (errors.Is(f.Err, context.DeadlineExceeded) || errors.Is(f.Err, context.Canceled)) {
		f.Err = &otapush.DeferError{Cause: fmt.Errorf("no answer within the push's time: %w", f.Err)}
	}
	errors.As(f.Err, &perm)
	switch {
	case f.mayRefresh() && f.Refreshed:
		// The token was rotated: the same push goes out again with the new
		// one, counted as a failure so that a token that keeps changing
		// cannot loop.
		return decision{Act: actDefer, Reason: "credential refreshed after " + perm.Error(), CountFailure: true}, true
	case f.mayRefresh():
		// The vendor refuses the credential itself and no new token
		// replaced it (a rotation gone wrong, a revoked key): every push
		// on it would be refused too. Its bucket pauses for the whole
		// fleet until the job's backoff ends, and the job keeps its work
		// for then: nothing is cleared while an operator fixes the
		// credential, and the refusal pages (CredentialRefused).
		return decision{Act: actDefer, Wait: failureWait(f.Policy, k, 0), Reason: "credential refused, its pushes paused: " + perm.Error(),
			CountFailure: true, Pause: true, CredentialRefused: true}, true
	case refusedFor(f.Err, otapush.ScopeHotel) && k <= f.Policy.MaxFailures:
		// The vendor refuses the hotel or its connection (an unknown or
		// deactivated hotel id, a property no longer connected), whatever
		// the push carried. The bucket serves other hotels and stays open;
		// the lane's job waits out its backoff holding the lane, so the
		// lane sends nothing meanwhile and keeps every change, and the
		// refusal pages (HotelRefused).
		return decision{Act: actDefer, Wait: failureWait(f.Policy, k, 0), Reason: "hotel refused, its lane paused: " + perm.Error(),
			CountFailure: true, HotelRefused: true}, true
	case perm != nil:
		// Refused for good: the same push cannot succeed. The job goes to
		// the dead-letter queue with the reason. State-backed work is not
		// settled but given up (Work.Abandon): what the push carried stays
		// pending, to be pushed again by the work's next job, and the job
		// in the dead letter names its work, so that a redrive pushes it
		// again once the cause is fixed.
		reason := perm.Error()
		switch perm.Concerns() {
		case otapush.ScopeCredential:
			reason = fmt.Sprintf("credential refused %d times in a row: %v", k, perm)
		case otapush.ScopeHotel:
			reason = fmt.Sprintf("hotel refused %d times in a row: %v", k, perm)
		}
		return decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: reason,
			CredentialRefused: perm.Concerns() == otapush.ScopeCredential, HotelRefused: perm.Concerns() == otapush.ScopeHotel}, true
	case errors.As(f.Err, &later) && errors.Is(later, limiter.ErrUnavailable):
		// The limiter's store, not the vendor, failed: fail closed, and
		// do not count it against the job.
		return decision{Act: actDefer, Wait: f.Policy.StoreCooldown, Reason: later.Error(), StoreError: true, ReportSlot: true}, true
	case errors.As(f.Err, &later) && later.Throttled:
		// Throttled to the end of its push: the vendor is there and
		// answers, and the 429 has paced the bucket for the whole fleet
		// (and, on an endpoint metered by items, made the job's requests
		// smaller: job.Fit). Pacing is the limiter's, never a failure of
		// the push: the job comes back after what the vendor asked, and
		// no sooner than its failures so far back it off, however many
		// times, within its max age and max deferrals; nor does a throttle
		// bring a slow vendor's job nearer to giving up.
		return decision{Act: actDefer, Wait: failureWait(f.Policy, k, later.After), Reason: later.Error(), ReportSlot: true}, true
	case errors.As(f.Err, &later) && k > f.Policy.MaxFailures:
		// Given up, as a refusal is (above): the job is dead-lettered and
		// its work stays pending.
		return decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: fmt.Sprintf("gave up after %d failed pushes in a row: %v", k, later)}, true
	case errors.As(f.Err, &later):
		// Retries spent or lost the slot; the next run acquires afresh.
		return decision{Act: actDefer, Wait: failureWait(f.Policy, k, later.After), Reason: later.Error(), CountFailure: true, ReportSlot: true}, true
	}
	return decision{}, false
}

// decideBegin says what becomes of a job whose work handed back no push
// (Work.Begin's error); held says whether it held a slot, now is the
// clock's reading. ok is false for a failure to read the work, which the
// caller defers for the store's cooldown (fail closed).
func decideBegin(err error, held bool, now time.Time) (d decision, ok bool) {
	var recheck *RecheckError
	switch {
	case errors.Is(err, ErrNothingToPush):
		return decision{Act: actCoalesce, Reason: err.Error()}, true
	case errors.Is(err, ErrIdle):
		return decision{Act: actCoalesce, Reason: err.Error(), Wasted: held}, true
	case errors.Is(err, job.ErrMalformed):
		return decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: err.Error()}, true
	case errors.As(err, &recheck):
		return decision{Act: actDefer, Wait: recheck.At.Sub(now), Reason: recheck.Error(), Wasted: held}, true
	}
	return decision{}, false
}

// refusal is a reservation the limiter refused, as decideRefusal reads it.
type refusal struct {
	Err error
	// Bound is what bounded the reservation below MaxReserve (noBound,
	// deadlineBound, maxAgeBound); End is when that bound ends, Deadline
	// the job's and MaxAge its route's.
	Bound    int
	End      time.Time
	Deadline time.Time
	MaxAge   time.Duration
	// LocalShare: the route may push within a local share while the store
	// is down, and the dispatcher has one.
	LocalShare bool
	Cooldown   time.Duration // Policy.StoreCooldown
	CtxErr     error         // the call's context ended
	// Horizon: the route books only so far ahead (Route.Horizon). Spread
	// is a random point of its emission interval, drawn for a horizon's
	// denial (horizonDenial), Sleep what the call may sleep from Now.
	Horizon bool
	Spread  time.Duration
	Now     time.Time
	Sleep   sleepBound
}

// horizonDenial reports whether r is a horizon's short denial: a wait for
// the route's next free token, with no bound of the job's below it.
func (r refusal) horizonDenial() bool {
	wait, denied := limiter.RetryAfter(r.Err)
	return denied && wait > 0 && r.Horizon && r.Bound == noBound
}

// decideRefusal says what becomes of a job the limiter gave no slot (a
// shadow route's job is the caller's): a horizon's short denial within the
// call's hold is slept for, and the job asks again; no slot before its
// bound ends it with no token spent; a
// bucket booked to the horizon, or contended, defers it; an invalid limit
// dead-letters it; a store down defers it for the cooldown (fail closed)
// unless the route has a local share. ok is false when the call's context
// ended, which the caller returns.
func decideRefusal(r refusal) (d decision, ok bool) {
	if wait, _ := limiter.RetryAfter(r.Err); r.horizonDenial() && r.Sleep.can(r.Now, wait+r.Spread) {
		// A horizon's denial is short (the next free token): wait for it
		// here, within the call's hold, rather than a trip through the
		// queue; the retry contends afresh, and urgent pushes go first.
		// Jobs denied together are told the same wait, and would all
		// retry at once for one token, each retry a write: each wakes at
		// a random point of the interval after it instead (Spread). That
		// costs no quota: the bucket is then short of its share, not
		// full, and keeps what it accrues until a retry takes it.
		return decision{Act: actSleep, Wait: wait + r.Spread, Reason: "a horizon's next token"}, true
	}
	if wait, denied := limiter.RetryAfter(r.Err); denied {
		if r.Bound != noBound {
			return unbookable(r.Bound, r.Deadline, r.MaxAge, r.End), true
		}
		// Even MaxReserve (or the route's horizon) ahead is booked: come
		// back when it is not.
		return decision{Act: actDefer, Wait: wait, Reason: "bucket booked beyond the booking horizon"}, true
	}
	switch {
	case errors.Is(r.Err, limiter.ErrContended):
		return decision{Act: actDefer, Reason: "bucket contended; retrying"}, true
	case errors.Is(r.Err, limiter.ErrInvalidArgument):
		return decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: "route has an invalid limit: " + r.Err.Error()}, true
	case r.CtxErr != nil:
		return decision{}, false
	case r.LocalShare && errors.Is(r.Err, limiter.ErrUnavailable):
		return decision{Act: actLocalShare, StoreError: true}, true
	}
	cooldown := r.Cooldown
	var open *breaker.OpenError
	if errors.As(r.Err, &open) {
		cooldown = max(cooldown, open.RetryAfter)
	}
	return decision{Act: actDefer, Wait: cooldown, Reason: "limiter store unavailable", StoreError: true}, true
}

// unbookable is the end of a job with no slot before its bound: shed past
// its deadline, expired past its max age (at end), with no token spent.
func unbookable(bound int, deadline time.Time, maxAge time.Duration, end time.Time) decision {
	if bound == deadlineBound {
		return decision{Act: actDeadLetter, Outcome: Shed, Reason: "no slot before the deadline " + deadline.Format(time.RFC3339) + "; no token spent"}
	}
	return decision{Act: actDeadLetter, Outcome: Expired,
		Reason: fmt.Sprintf("expired: no slot before its max_age %s ends at %s; no token spent", maxAge, end.Format(time.RFC3339))}
}

// quotaRefusal is a take of a quota route's token and unit (quota.go)
// the limiter refused, as decideQuota reads it.
type quotaRefusal struct {
	Err error
	// Spent: the quota refused, not one of the route's rate limits
	// (quotaSpent); Quota is the route's, for the reason.
	Spent bool
	Quota limiter.QuotaBucket
	// Held: the request's slot was booked already and only its unit was
	// refused (heldQuota): the slot goes unused, nothing is slept for.
	Held bool
	// Now is the clock's reading, Sleep what the call may sleep from it.
	Now   time.Time
	Sleep sleepBound
	// Deadline is the job's, FirstSeen and MaxAge bound its age.
	Deadline, FirstSeen time.Time
	MaxAge              time.Duration
	Cooldown            time.Duration // Policy.StoreCooldown
}

// decideQuota says what becomes of a job whose take of its route's quota
// was refused: the route's next token, near, within the call's hold and
// before the job's deadline and max age, is slept for, and the job asks
// again; a wait that ends past its deadline or max age ends the job with
// nothing spent (a quota's reset may be hours away, beyond MaxReserve,
// which bounds only slots); any other denial defers it to the next token
// or the quota's reset; contention defers it at once; an invalid limit or
// quota dead-letters it; a store down defers it for the cooldown (fail
// closed).
func decideQuota(q quotaRefusal) decision {
	wait, denied := limiter.RetryAfter(q.Err)
	back := q.Now.Add(wait)
	end := q.FirstSeen.Add(q.MaxAge)
	switch {
	case denied && !q.Spent && !q.Held && q.Sleep.can(q.Now, wait) && back.Before(end) && (q.Deadline.IsZero() || back.Before(q.Deadline)):
		// The next token is near: wait for it here, as for a slot.
		return decision{Act: actSleep, Wait: wait, Reason: "the quota route's next token"}
	case denied && !q.Deadline.IsZero() && !back.Before(q.Deadline):
		return unbookable(deadlineBound, q.Deadline, q.MaxAge, q.Deadline)
	case denied && !back.Before(end):
		return unbookable(maxAgeBound, q.Deadline, q.MaxAge, end)
	case denied && q.Spent:
		return decision{Act: actDefer, Wait: wait,
			Reason: fmt.Sprintf("quota of %d per %s spent: back after its reset, spread over the minute after it", q.Quota.Quota.Count, q.Quota.Quota.Period)}
	case denied:
		return decision{Act: actDefer, Wait: wait, Reason: "no token of the quota route's limits now"}
	case errors.Is(q.Err, limiter.ErrContended):
		return decision{Act: actDefer, Reason: "bucket contended; retrying"}
	case errors.Is(q.Err, limiter.ErrInvalidArgument):
		return decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: "route has an invalid limit or quota: " + q.Err.Error()}
	}
	cooldown := q.Cooldown
	var open *breaker.OpenError
	if errors.As(q.Err, &open) {
		cooldown = max(cooldown, open.RetryAfter)
	}
	return decision{Act: actDefer, Wait: cooldown, Reason: "limiter store unavailable", StoreError: true}
}
