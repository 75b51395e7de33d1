package dispatch

import (
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// The dispatcher decides, then acts, as sdk/gcra decides and sdk/limiter
// writes: decide is a function of values (the job, what its route asks,
// the policy, the clock's reading), with no I/O and no clock of its own.
// It returns a plan: the steps to take with the job, in order, as far as
// they can be known before any is taken (begin its work, the lease or the
// token first, book a slot), and serve carries them out. What a step
// learns that the plan could not know (whether a lingering job's early
// slot was granted, a recheck's answer, a revoked slot) ends the plan,
// and serve asks decide again. A slot is known only once booked: what to
// do with it (its grace, blocking distance, shadow mode, the push) is
// decideSlot's (decide_slot.go), asked with the slot.

// action is what a step of a plan does with a job.
type action int

const (
	// actBookLinger: book the lingering job's slot now, of its bucket
	// taken with burst 1, at most decision.Wait ahead (lingerSlot); its
	// bucket would fill up before the linger ends. Denied, ask again with
	// situation.LingerAsked.
	actBookLinger action = iota + 1
	// actSleep: sleep decision.Wait, then ask again; the job is due then.
	actSleep
	// actDefer: defer the job for decision.Wait, holding what it holds.
	actDefer
	// actDeadLetter: dead-letter the job as decision.Outcome (Expired,
	// Shed) with decision.Reason.
	actDeadLetter
	// actRecheck: begin the job, which holds no slot, to find out whether
	// its work is its own before booking one (Task.Recheck).
	actRecheck
	// actReserve: book a slot, dropping an expired hold first if
	// decision.Hold (a wasted slot).
	actReserve
	// actPush: push at the slot held, after sleeping decision.Wait; with
	// decision.Confirm, confirm the slot's stamp first (probe.go).
	actPush
	// actLocalShare: the limiter store is down, and the route pushes
	// within this process's local share of its limit (localShare).
	actLocalShare
	// actCoalesce: the job has nothing to send (a duplicate, or work
	// another job carries); it ends here.
	actCoalesce
	// actRevoke: a throttle since the slot was booked revoked it (or the
	// store could not confirm it): the hold goes, with a lease taken
	// first, and the job starts over as if it came in without one.
	actRevoke
	// actPrepare: after sleeping decision.Wait, begin the job's work
	// (claim and render) before its slot, or before booking one, so that
	// only the send waits for the slot (situation.Prepares); drop an
	// expired hold first if decision.Hold, and give back a lease taken
	// first if decision.FreeLease.
	actPrepare
	// actJoinLease: count the push among those going for its route's
	// in-flight lease (Leases.join), after which the lease set's crowding
	// is read (situation.Lease, decision.IfCrowded). Dropping an expired
	// hold first if decision.Hold.
	actJoinLease
	// actLeaseFirst: take the route's in-flight lease before the token
	// (lease.go); dropping an expired hold first if decision.Hold.
	actLeaseFirst
)

func (a action) String() string {
	return map[action]string{actBookLinger: "book-linger", actSleep: "sleep", actDefer: "defer", actDeadLetter: "dead-letter",
		actRecheck: "recheck", actReserve: "reserve", actPush: "push", actCoalesce: "coalesce", actLocalShare: "local-share",
		actRevoke: "revoke", actPrepare: "prepare", actJoinLease: "join-lease", actLeaseFirst: "lease-first"}[a]
}

// situation is everything decide reads.
type situation struct {
	Job job.Job
	Now time.Time
	// Owned: the job came back from a recheck as its work's owner, so the
	// checks before it (due, alive, its work its own) are done.
	Owned bool
	// Booked: the job's hold was booked in this call, not carried in: its
	// grace is not checked again.
	Booked bool
	// LingerAsked: a lingering job asked for its early slot and was denied.
	LingerAsked bool
	// LingerReach is how far ahead a lingering job may book its early slot
	// (lingerReach); zero: it may not.
	LingerReach time.Duration
	// Rechecks: the job only comes back to see whether its work is its own
	// (Task.Recheck), which it finds out first unless it holds a slot.
	Rechecks bool
	// Shadow: the route pushes at once and records what enforcement would do.
	Shadow bool
	// Next: a push of this call handed the job back (its work has more
	// pending), rather than the call receiving it.
	Next bool
	// MaxAge is the route's max age (lifetime), Grace the lateness its slot
	// tolerates (Dispatcher.grace).
	MaxAge, Grace time.Duration
	// Sleep bounds what the call may sleep (canSleep's inputs).
	Sleep sleepBound
	// Lead is how early a deferral comes back (Dispatcher.leadRule).
	Lead leadRule
	// Early is how long before a stamped slot it is confirmed
	// (limiter.ConfirmAfter).
	Early time.Duration
	// Revoked: confirming the slot the job holds said it may not be spent
	// (probe.go: a throttle since, or the store could not say).
	Revoked bool
	// Prepares: the job's work is begun (claimed and rendered) before its
	// slot, PrepLead ahead of it, or before its slot is booked; Prepared:
	// it was. What comes between a slot and its send is lateness, which
	// past the grace wastes the slot: on a slow store the claim and the
	// render alone took longer than the margin.
	Prepares, Prepared bool
	PrepLead           time.Duration
	// StoreFailing: the limiter's store failed this process's last
	// reservation (limiter.ErrUnavailable).
	StoreFailing bool
	// Silence is how long before a slot booked ahead (job.Hold.Ahead) its
	// silence is asked (limiter.SilenceAfter): the read's latency then
	// delays the check rather than the send.
	Silence time.Duration
	// Lease is where the job stands with its route's in-flight lease.
	Lease leaseState
}

// leaseState is where a job stands with its route's in-flight lease
// (lease.go), as decide reads it to choose the lease or the token first.
type leaseState struct {
	// Gated: the route has max_in_flight and the dispatcher its Leases.
	Gated bool
	// Joined: the push is counted among those going for the lease
	// (Leases.join), and Crowded is read.
	Joined bool
	// Crowded: a lease of the route is likely waited for now
	// (Leases.crowded, or the job's last push found none free:
	// job.LeaseBusy).
	Crowded bool
	// Held: the job holds a lease it took before its token.
	Held bool
}

// decision is one step of a plan (decideSlot's too), or what a refusal, a
// failed begin or a failed push comes to (decide_refused.go).
type decision struct {
	Act    action
	Wait   time.Duration
	Reason string
	// Outcome is the dead letter's kind, for actDeadLetter.
	Outcome Outcome
	// IfCrowded: an actLeaseFirst planned before the push joined those
	// going for a lease (actJoinLease), taken only if the lease set is
	// crowded then; otherwise the token comes first (the next step).
	IfCrowded bool
	// Hold: what becomes of the job's hold before the step (holding.go):
	// dropped, since it expired before the job ran (a wasted slot) or a
	// deferral would outlast it.
	Hold holding
	// Confirm: the slot carries a stamp, confirmed before it is spent.
	Confirm bool
	// Shadow: push at once, with no in-flight lease and no confirmation
	// (a shadow route records what enforcement would do instead).
	Shadow bool
	// FreeLease: the slot is further off than its grace, so an in-flight
	// lease taken before the token goes back: the vendor's concurrency
	// would idle under it meanwhile, and the push takes one at its slot.
	FreeLease bool
	// Wasted: the slot the job held goes unused.
	Wasted bool
	// CountFailure: the job failed once more (job.Failures); Pause: its
	// bucket pauses, fleet-wide, for Wait (a refused credential).
	CountFailure, Pause bool
	// StoreError, CredentialRefused, HotelRefused: what the Result reports.
	StoreError, CredentialRefused, HotelRefused bool
	// ReportSlot: the Result names the slot the failed push held.
	ReportSlot bool
	// ShadowWait and ShadowWouldDefer are what enforcement would have done
	// with a Shadow route's push that goes out now.
	ShadowWait       time.Duration
	ShadowWouldDefer bool
}

// plan is what decide says to do with a job: its steps, taken in order.
// The last one ends the call's hold on the job (push, defer,
// dead-letter), or leaves the job holding a slot (Slot: decideSlot says
// what follows), or learns what the plan could not know (serve asks decide
// again).
type plan struct {
	Steps []decision
	// Slot: after the last step the job holds a slot, booked in this call
	// or begun for ahead of it.
	Slot bool
	// Until is when the plan stops holding: from then on the job may be
	// past its max age or its deadline, or, handed back, past the call's
	// hold, which decide checks before anything else. Zero: no bound (the
	// job owns its work after a recheck, or booked its slot in the call).
	Until time.Time
	// StoreFailing is situation.StoreFailing as the plan read it: whether
	// a job begins its work before booking depends on it.
	StoreFailing bool
}

// holds reports whether p still says what decide would, at now and with
// the limiter's store failing or not.
func (p plan) holds(now time.Time, storeFailing bool) bool {
	return (p.Until.IsZero() || now.Before(p.Until)) && storeFailing == p.StoreFailing
}

// decide says what to do with a job: the plan of its next steps. The
// policy, in order: past its max age or its deadline (dead-letter);
// handed back by a push of the call past its hold and holding no slot to
// use (defer, unbooked; a slot past its grace dropped); not
// due yet (book its early slot if its bucket fills first; sleep a short
// wait, defer a long one); a job that only rechecks its work (begin it
// first); a hold expired past its grace, or none (begin the work first,
// then the lease or the token first, and book a slot); a slot held, to be
// used (decideSlot). The plan takes each step's expected outcome for
// granted (the work begun, the push counted among those going for a
// lease, the lease taken) and ends where an outcome is not known ahead.
func decide(s situation) plan {
	p := plan{Until: s.until(), StoreFailing: s.StoreFailing}
	for {
		d, atSlot := s.next()
		if atSlot {
			rest := decideSlot(s)
			p.Steps, p.Slot = append(p.Steps, rest.Steps...), rest.Slot
			return p
		}
		if d.Act == actLeaseFirst && s.Lease.Crowded && len(p.Steps) > 0 && p.Steps[len(p.Steps)-1].Act == actJoinLease {
			d.IfCrowded = true
		}
		p.Steps = append(p.Steps, d)
		var known bool
		if s, known = s.after(d); !known {
			p.Slot = d.Act == actReserve || (d.Act == actPrepare && s.Job.Hold.Held())
			return p
		}
	}
}

// next is the step decide takes in s, or atSlot: the job holds a slot to
// use, which decideSlot plans for.
func (s situation) next() (d decision, atSlot bool) {
	j, now := s.Job, s.Now
	if s.Revoked {
		// Booked again rather than earn a 429: the rate is lower than the
		// one the slot was granted at, or silence was asked past it.
		return decision{Act: actRevoke}, false
	}
	if !s.Owned && !s.Booked {
		// A job past its max age or its deadline ends first, whatever it
		// waits for: deferred or slept, it would only come back to end.
		if !now.Before(j.FirstSeen.Add(s.MaxAge)) {
			return decision{Act: actDeadLetter, Outcome: Expired,
				Reason: fmt.Sprintf("expired: first seen %s, over its max_age %s ago", j.FirstSeen.Format(time.RFC3339), s.MaxAge)}, false
		}
		if !j.Deadline.IsZero() && !now.Before(j.Deadline) {
			return decision{Act: actDeadLetter, Outcome: Shed, Reason: fmt.Sprintf("deadline %s passed before the push", j.Deadline.Format(time.RFC3339))}, false
		}
		if s.Next && s.Sleep.over(now) && !s.slotToUse() {
			// The call's hold bounds its chain of pushes, not only its
			// sleeps: a shadow route never sleeps for a slot, nor does a
			// bucket whose slots come faster than its pushes, and a lane
			// with a backlog would keep the call pushing to its end. The
			// job goes before booking a slot, which the queue's trip would
			// waste. A slot it holds still to be used (its work begun for
			// it, or booked as it lingered) is decideSlot's, which keeps
			// to the hold too: deferred, such a job would come back after
			// its slot. One past its grace is dropped here (wasted).
			return decision{Act: actDefer, Wait: max(j.NotBefore.Sub(now), 0), Reason: handedBackLate, Hold: holding{drop: j.Hold.Held()}}, false
		}
		if !j.NotBefore.IsZero() && now.Before(j.NotBefore) {
			wait := j.NotBefore.Sub(now)
			switch {
			case !s.LingerAsked && s.LingerReach > 0:
				return decision{Act: actBookLinger, Wait: s.LingerReach}, false
			case wait > s.Lead.lead(wait) || !s.Sleep.can(now, wait):
				return decision{Act: actDefer, Wait: wait, Reason: "not due yet"}, false
			}
			return decision{Act: actSleep, Wait: wait}, false
		}
		if !j.Hold.Held() && s.Rechecks {
			return decision{Act: actRecheck}, false
		}
	}
	// A job with work to begin begins it before booking: a slot booked
	// first and due at once would wait for the claim and the render. Not
	// while the limiter's store fails: no slot would follow, and the claim
	// would be held through the cooldown's deferrals (a stale copy of a
	// job would take its lane over only to expire with it).
	beginFirst := s.Prepares && !s.Prepared && !s.Shadow && !s.StoreFailing
	switch {
	case s.slotToUse():
		return decision{}, true
	case j.Hold.Held() && beginFirst:
		return decision{Act: actPrepare, Hold: dropped}, false
	case j.Hold.Held():
		return s.reserve(true), false
	case beginFirst:
		return decision{Act: actPrepare}, false
	}
	return s.reserve(false), false
}

// after is s as step d, going as expected, leaves it, and whether the
// next step is known in it: after beginning the work, after counting the
// push among those going for a lease (as if the set were crowded: the
// lease-first step this plans is taken only if it is, IfCrowded, and the
// token booked next either way), and after taking the lease. The clock is
// not moved: what the time a step takes changes is what plan.Until
// bounds, and a slot to use is decideSlot's, asked at its time.
func (s situation) after(d decision) (situation, bool) {
	d.Hold.apply(&s.Job)
	switch d.Act {
	case actPrepare:
		s.Prepared = true
		return s, !s.Job.Hold.Held()
	case actJoinLease:
		s.Lease.Joined, s.Lease.Crowded = true, true
		return s, true
	case actLeaseFirst:
		s.Lease.Held = true
		return s, true
	}
	return s, false
}

// until is when the checks decide makes before anything else (max age,
// deadline, a handed-back job past the call's hold) would say otherwise
// than at s.Now; zero when they are not made (plan.Until).
func (s situation) until() time.Time {
	if s.Owned || s.Booked {
		return time.Time{}
	}
	until := s.Job.FirstSeen.Add(s.MaxAge)
	earliest := func(t time.Time) {
		if !t.IsZero() && t.Before(until) {
			until = t
		}
	}
	earliest(s.Job.Deadline)
	if s.Next {
		if !s.Sleep.Hold.IsZero() {
			earliest(s.Sleep.Hold.Add(time.Nanosecond)) // over: after the hold
		}
		if !s.Sleep.Deadline.IsZero() {
			earliest(s.Sleep.Deadline.Add(-s.Sleep.Margin))
		}
	}
	return until
}

// slotToUse reports whether the job holds a slot to use (decideSlot's):
// booked in this call, its work begun for it, or carried in within its
// grace.
func (s situation) slotToUse() bool {
	return s.Job.Hold.Held() && (s.Booked || s.Prepared || !s.expired())
}

// expired reports whether the slot the job holds passed its grace.
func (s situation) expired() bool { return s.Now.After(s.Job.Hold.At.Add(s.Grace)) }

// reserve says how a job with no slot books one, dropping its expired
// hold first if drop: while its route's lease set is crowded, it takes
// its lease first and books a token it spends at once, since a token
// booked first would likely pass its grace in the wait for a lease and be
// booked again. A shadow route too: its token never waits, so the lease
// idles for nothing, and a lease refused before the push begins costs no
// claim and no render, where token first a shadow job back from a
// deferral for a full set would claim its lane and read its state at
// every return (adversary seed 800).
func (s situation) reserve(drop bool) decision {
	if s.Lease.Gated {
		switch {
		case !s.Lease.Joined:
			return decision{Act: actJoinLease, Hold: holding{drop: drop}}
		case s.Lease.Crowded && !s.Lease.Held:
			return decision{Act: actLeaseFirst, Hold: holding{drop: drop}}
		}
	}
	return decision{Act: actReserve, Hold: holding{drop: drop}}
}

// sleepBound is how long a call may keep a job in process: until Hold
// (the call's MaxHold, or the shorter hold its caller gave), and Margin
// before Deadline
// (the invocation's end). Zero times bound nothing.
type sleepBound struct {
	Hold, Deadline time.Time
	Margin         time.Duration
}

// handedBackLate is why a job a push handed back past the call's hold
// was deferred.
const handedBackLate = "handed back after the call's hold; the queue hands it on"

// over reports whether now is past b: the call's hold has ended, or the
// invocation's deadline margin has begun.
func (b sleepBound) over(now time.Time) bool {
	if !b.Hold.IsZero() && now.After(b.Hold) {
		return true
	}
	return !b.Deadline.IsZero() && !now.Add(b.Margin).Before(b.Deadline)
}

// can reports whether sleeping wait from now stays within b.
func (b sleepBound) can(now time.Time, wait time.Duration) bool {
	if wait <= 0 {
		return true
	}
	until := now.Add(wait)
	if !b.Hold.IsZero() && until.After(b.Hold) {
		return false
	}
	return b.Deadline.IsZero() || until.Add(b.Margin).Before(b.Deadline)
}

// leadRule is how early a deferral of a wait comes back: by Floor (the
// policy's BlockThreshold), by the share Ratio of the wait (the policy's
// LateRatio, raised to the queue's lateness seen) or by Behind (the busy
// workers' lateness seen, whatever the delay), whichever is most.
type leadRule struct {
	Floor, Behind time.Duration
	Ratio         float64
}

func (r leadRule) lead(wait time.Duration) time.Duration {
	return max(r.Floor, r.Behind, time.Duration(r.Ratio*float64(wait)))
}
