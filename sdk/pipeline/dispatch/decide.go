package dispatch

import (
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// The dispatcher decides, then acts, as sdk/gcra decides and sdk/limiter
// writes: decide is a function of values (the job, what its route asks,
// the policy, the clock's reading), with no I/O and no clock of its own,
// and serve carries out what it says (reserve, sleep, push, defer,
// dead-letter) and asks again with what changed.

// action is what decide says to do with a job next.
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
	// decision.DropHold (a wasted slot).
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
	// expired hold first if decision.DropHold, and give back a lease taken
	// first if decision.FreeLease.
	actPrepare
	// actJoinLease: count the push among those going for its route's
	// in-flight lease (Leases.join) and read whether the lease set is
	// crowded (situation.Lease), then ask again. Dropping an expired hold
	// first if decision.DropHold.
	actJoinLease
	// actLeaseFirst: take the route's in-flight lease before the token
	// (lease.go), then ask again; dropping an expired hold first if
	// decision.DropHold.
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
	// (Task.Recheck).
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
	// Lead is how early a deferral comes back (Dispatcher.lead).
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
	// (Leases.crowded).
	Crowded bool
	// Held: the job holds a lease it took before its token.
	Held bool
}

// decision is what decide says.
type decision struct {
	Act    action
	Wait   time.Duration
	Reason string
	// Outcome is the dead letter's kind, for actDeadLetter.
	Outcome Outcome
	// DropHold: the hold expired before the job ran (a wasted slot).
	DropHold bool
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

// decide says what to do with a job next. The policy, in order: past its
// max age or its deadline (dead-letter); handed back by a push of the call
// past its hold (defer, unbooked); not due yet (book its early slot if its
// bucket fills first; sleep a short wait, defer a long one); a job
// that only rechecks its work (begin it first); a hold expired past its
// grace, or none (reserve); a shadow route (push now); a slot beyond
// blocking distance or the call's hold (defer, to come back early by the
// lead); otherwise sleep to the slot and push.
func decide(s situation) decision {
	j, now := s.Job, s.Now
	if s.Revoked {
		// Booked again rather than earn a 429: the rate is lower than the
		// one the slot was granted at, or silence was asked past it.
		return decision{Act: actRevoke}
	}
	if !s.Owned && !s.Booked {
		// A job past its max age or its deadline ends first, whatever it
		// waits for: deferred or slept, it would only come back to end.
		if !now.Before(j.FirstSeen.Add(s.MaxAge)) {
			return decision{Act: actDeadLetter, Outcome: Expired,
				Reason: fmt.Sprintf("expired: first seen %s, over its max_age %s ago", j.FirstSeen.Format(time.RFC3339), s.MaxAge)}
		}
		if !j.Deadline.IsZero() && !now.Before(j.Deadline) {
			return decision{Act: actDeadLetter, Outcome: Shed, Reason: fmt.Sprintf("deadline %s passed before the push", j.Deadline.Format(time.RFC3339))}
		}
		if s.Next && s.Sleep.over(now) {
			// The call's hold bounds its chain of pushes, not only its
			// sleeps: a shadow route never sleeps for a slot, nor does a
			// bucket whose slots come faster than its pushes, and a lane
			// with a backlog would keep the call pushing to its end. The
			// job goes before booking a slot, which the queue's trip would
			// waste.
			return decision{Act: actDefer, Wait: max(j.NotBefore.Sub(now), 0), Reason: handedBackLate}
		}
		if !j.NotBefore.IsZero() && now.Before(j.NotBefore) {
			wait := j.NotBefore.Sub(now)
			switch {
			case !s.LingerAsked && s.LingerReach > 0:
				return decision{Act: actBookLinger, Wait: s.LingerReach}
			case wait > s.Lead.lead(wait) || !s.Sleep.can(now, wait):
				return decision{Act: actDefer, Wait: wait, Reason: "not due yet"}
			}
			return decision{Act: actSleep, Wait: wait}
		}
		if !j.Hold.Held() && s.Rechecks {
			return decision{Act: actRecheck}
		}
	}
	// A job with work to begin begins it before booking: a slot booked
	// first and due at once would wait for the claim and the render. Not
	// while the limiter's store fails: no slot would follow, and the claim
	// would be held through the cooldown's deferrals (a stale copy of a
	// job would take its lane over only to expire with it).
	prepare := s.Prepares && !s.Prepared && !s.Shadow
	beginFirst := prepare && !s.StoreFailing
	if !s.Booked && j.Hold.Held() && now.After(j.Hold.At.Add(s.Grace)) {
		if beginFirst {
			return decision{Act: actPrepare, DropHold: true}
		}
		if s.Prepared {
			// Its work took longer to begin than it was given: the push
			// goes now, and the request books a fresh token as it leaves
			// (spendable), as any push reaching its slot late does. Booked
			// again here, a store this slow would make every slot late and
			// the job loop through the queue, claiming each time.
			return decision{Act: actPush}
		}
		return s.reserve(true)
	}
	if !j.Hold.Held() {
		if beginFirst {
			return decision{Act: actPrepare}
		}
		return s.reserve(false)
	}
	wait := j.Hold.At.Sub(now)
	if s.Shadow {
		// Enforcement would sleep or defer here; shadow mode records which
		// and pushes now. The booked slot stays in the bucket, so the
		// bucket shows the pace enforcement would keep.
		d := decision{Act: actPush, Shadow: true}
		if wait > 0 {
			d.ShadowWait, d.ShadowWouldDefer = wait, wait > s.Lead.lead(wait) || !s.Sleep.can(now, wait)
		}
		return d
	}
	prepLead := time.Duration(0)
	if prepare {
		prepLead = s.PrepLead
	}
	bound := s.Sleep
	if s.Prepared && wait <= s.PrepLead {
		// Begun for this slot: the call's hold counted the work, which
		// is no sleep, and the push sleeps what is left (the deadline
		// still bounds it).
		bound.Hold = time.Time{}
	}
	if lead := s.Lead.lead(wait) + prepLead; wait > lead || !bound.can(now, wait) {
		// Come back once the slot is within blocking distance, and sleep
		// the rest. SQS delays are whole seconds and deliveries run late
		// (in proportion to the delay on the emulator, by seconds under a
		// scaling event source mapping), so the job comes back early by
		// the lateness seen, never less than BlockThreshold; a wait that
		// lateness alone could eat is slept here instead.
		return decision{Act: actDefer, Wait: max(wait-lead, 0), Reason: "waiting for its reserved slot"}
	}
	if prepare {
		return decision{Act: actPrepare, Wait: max(wait-prepLead, 0), FreeLease: wait > s.Grace}
	}
	// A stamped slot is confirmed Early before it comes, and a silence
	// asked Silence before it, so that the reads' latency does not delay
	// the push past its slot: late pushes bunch at the vendor, and past
	// the grace waste their slots. The push sleeps the rest.
	d := decision{Act: actPush, Confirm: stampOf(j.Hold) != nil, FreeLease: wait > s.Grace}
	early := time.Duration(0)
	if d.Confirm {
		early = s.Early
	}
	if j.Hold.Ahead {
		early = max(early, s.Silence)
	}
	if wait > early {
		d.Wait = wait - early
	}
	return d
}

// reserve says how a job with no slot books one, dropping its expired
// hold first if drop: while its route's lease set is crowded, it takes
// its lease first and books a token it spends at once, since a token
// booked first would likely pass its grace in the wait for a lease and be
// booked again. A shadow route pushes at once and keeps its order.
func (s situation) reserve(drop bool) decision {
	if s.Lease.Gated && !s.Shadow {
		switch {
		case !s.Lease.Joined:
			return decision{Act: actJoinLease, DropHold: drop}
		case s.Lease.Crowded && !s.Lease.Held:
			return decision{Act: actLeaseFirst, DropHold: drop}
		}
	}
	return decision{Act: actReserve, DropHold: drop}
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
// policy's BlockThreshold) or by the share Ratio of the wait, whichever
// is more (the policy's LateRatio, raised to the lateness seen).
type leadRule struct {
	Floor time.Duration
	Ratio float64
}

func (r leadRule) lead(wait time.Duration) time.Duration {
	return max(r.Floor, time.Duration(r.Ratio*float64(wait)))
}
