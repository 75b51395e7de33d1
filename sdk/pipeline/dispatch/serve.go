package dispatch

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// serve takes one job from its slot (or lack of one) to a push, a deferral
// or a shed: it carries out the plan decide makes (decideSlot's once the
// job holds a slot), and asks again when a step learns what the plan could
// not know or the plan stops holding. handedBack says a push of this call
// handed j back; next is the job j's push hands back, if any.
func (d *Dispatcher) serve(ctx context.Context, j job.Job, t *task, now time.Time, handedBack bool) (Result, *job.Job, error) {
	var pre Result // what the call records of a job before its outcome
	s := d.situation(ctx, t)
	s.Next = handedBack
	// first holds the in-flight lease taken before the token (actLeaseFirst),
	// freed on every way out: it bounds requests at the vendor, and none
	// goes out but the push's.
	first := &firstLease{}
	defer func() { first.end() }()
	var revokeErr error // why the slot's confirmation failed, for the log
	// prep is the push j's work was begun for ahead of its slot (or of its
	// booking): its claim holds through a re-booking, and a deferral
	// carries the job as Begin left it, which begins again when it is back.
	var prep *Payload
	s.Prepares = t.work != nil && !t.atSlot
	var p plan // asked for at the first step
	for i := 0; ; i++ {
		if i >= len(p.Steps) || !p.holds(now, d.storeFailing.Load()) {
			s.Job, s.Now = j, now
			d.refresh(&s, t, first)
			if p.Slot && p.holds(now, s.StoreFailing) {
				p = decideSlot(s)
			} else {
				p = decide(s)
			}
			i = 0
		}
		dec := p.Steps[i]
		if dec.Hold.drop {
			d.log().Info("reserved slot expired; re-acquiring", "job_id", j.ID, "slot", j.Hold.At, "late", now.Sub(j.Hold.At))
			pre.WastedSlots++
		}
		dec.Hold.apply(&j)
		switch dec.Act {
		case actPrepare:
			if dec.FreeLease {
				first.free()
			}
			held := j.Hold.Held() // an expired hold is dropped above
			if dec.Wait > 0 {
				if err := d.sleep(ctx, dec.Wait); err != nil {
					return Result{}, nil, err
				}
			}
			begun, pl, err := d.begin(ctx, j, t)
			if err != nil {
				res, err := d.beginFailed(ctx, begun, t, Result{JobID: j.ID, Slot: j.Hold.At}, held, err)
				return pre.then(res), nil, err
			}
			j, prep, s.Prepared, now = begun, &pl, true, d.now()
			continue
		case actBookLinger:
			if h := d.lingerSlot(ctx, t.Route, dec.Wait); h.take {
				// Its bucket fills up before the linger ends: the push takes
				// the slot it booked rather than let the bucket lose tokens.
				h.apply(&j)
				now = d.now()
			}
			s.LingerAsked, p = true, plan{}
			continue
		case actSleep:
			// A short wait for a job not due yet is slept here; the slot is
			// booked after it, as late as possible.
			if err := d.sleep(ctx, dec.Wait); err != nil {
				return Result{}, nil, err
			}
			j.NotBefore, now, p = time.Time{}, d.now(), plan{}
			continue
		case actDefer, actDeadLetter:
			// What a reservation recorded of a job it let through is the
			// push's, not a deferral's: only its wasted and revoked slots
			// carry over.
			first.free()
			res, err := d.act(ctx, j, t, dec)
			return Result{WastedSlots: pre.WastedSlots, RevokedSlots: pre.RevokedSlots}.then(res), nil, err
		case actRecheck:
			// Find out before booking a slot: a job told to come back again
			// would leave it unused.
			owned, pl, res, err := d.recheck(ctx, j, t)
			if owned == nil {
				return pre.then(res), nil, err
			}
			// It owns its work now: it never rechecks again, and what
			// Begin rendered is its push's.
			j, now, s.Owned, t.recheck = *owned, d.now(), true, false
			prep, s.Prepared, p = &pl, true, plan{}
			continue
		case actJoinLease:
			first.leave = d.Leases.join(t.InFlight.Key)
			s.Lease.Joined = true
			continue
		case actLeaseFirst:
			if dec.IfCrowded && !d.crowded(j, t) {
				continue // the token first
			}
			held, ok, res, err := d.acquire(ctx, j, t)
			if !ok {
				return pre.then(res), nil, err
			}
			first.held, now, j.LeaseBusy = held, d.now(), false
			continue
		case actReserve:
			b, err := d.reserve(ctx, j, t, now, first)
			pre = pre.then(b.res)
			if b.done || err != nil {
				return pre, nil, err
			}
			b.hold.apply(&j)
			now, s.Booked = d.now(), true
			continue
		case actRevoke:
			d.log().Info("slot revoked by a throttle; re-acquiring", "job_id", j.ID, "slot", j.Hold.At, "err", revokeErr)
			// A lease taken first goes back too: the job may linger or
			// wait for its new slot, and no request of it is near.
			first.free()
			pre.RevokedSlots++
			dropped.apply(&j)
			now, p = d.now(), plan{}
			s.Owned, s.Booked, s.LingerAsked, s.Revoked = false, false, false, false
			continue
		}
		// actPush
		pre.ShadowWait = max(pre.ShadowWait, dec.ShadowWait)
		pre.ShadowWouldDefer = pre.ShadowWouldDefer || dec.ShadowWouldDefer
		if dec.Shadow {
			res, next, err := d.push(ctx, j, t, first.held, prep)
			return pre.then(res), next, err
		}
		if dec.FreeLease {
			first.free()
		}
		if dec.Wait > 0 {
			if err := d.sleep(ctx, dec.Wait); err != nil {
				return Result{}, nil, err
			}
		}
		if dec.Confirm {
			if s.Revoked, revokeErr = d.revoked(ctx, j, t.Route); s.Revoked {
				p = plan{}
				continue
			}
		}
		res, next, err := d.push(ctx, j, t, first.held, prep)
		return pre.then(res), next, err
	}
}

// refresh reads into s what may have changed since decide was last asked:
// what the call learned (the lateness of deliveries, how long work takes
// to begin, whether the limiter's store fails, the lease set's crowding)
// and what follows from the job as it stands.
func (d *Dispatcher) refresh(s *situation, t *task, first *firstLease) {
	if !s.LingerAsked && !s.Owned && !s.Booked {
		s.LingerReach, _ = d.lingerReach(s.Job, t.Route, s.Now)
	}
	s.Rechecks = t.recheck
	s.Lead = d.leadRule()
	s.PrepLead = d.prep.lead(d.Policy.MaxHold, t.Bucket.Limit.Margin)
	s.StoreFailing = d.storeFailing.Load()
	s.Lease.Held = first.held != nil
	if s.Lease.Joined {
		s.Lease.Crowded = d.crowded(s.Job, t)
	}
}

// crowded reports whether j's push likely waits for its route's lease
// now: its process knows the lease set contended (Leases.crowded), or j's
// last push found it full (job.LeaseBusy), which a process that took no
// lease of the set lately does not know. Adversary seed 42 (one lease a
// bucket, a vendor answering in seconds): jobs back from such deferrals
// booked their tokens first, waited the call's hold for the lease and
// were deferred again, the token wasted: about 570 a run.
func (d *Dispatcher) crowded(j job.Job, t *task) bool {
	return j.LeaseBusy || d.Leases.crowded(d.Leases.Effective(*t.InFlight))
}

// act carries out a decision that ends the call's hold on j: a deferral
// or a dead letter, j giving up the slot it holds first if dec.Hold says
// so: it would pass while the job waits.
func (d *Dispatcher) act(ctx context.Context, j job.Job, t *task, dec decision) (Result, error) {
	dec.Hold.apply(&j)
	if dec.Act == actDeadLetter {
		return d.deadLetter(ctx, j, t, dec.Outcome, dec.Reason)
	}
	return d.deferJob(ctx, j, t, dec.Wait, dec.Reason)
}

// situation is what decide reads of the dispatcher and the call: the
// parts that stay the same while one job is served.
func (d *Dispatcher) situation(ctx context.Context, t *task) situation {
	s := situation{Shadow: t.Shadow, Grace: d.grace(t.Bucket.Limit), Early: limiter.ConfirmAfter, Silence: limiter.SilenceAfter}
	s.Lease.Gated = t.InFlight != nil && d.Leases != nil
	s.MaxAge, _ = d.lifetime(t.Route)
	s.Sleep = d.sleepBound(ctx, t)
	return s
}

// leadRule is how early a deferral comes back: by BlockThreshold, or by
// the policy's LateRatio of its wait, raised to the lateness seen; by the
// busy workers' lateness at most MaxHold, what a deferred call may sleep.
func (d *Dispatcher) leadRule() leadRule {
	return d.late.rule(d.Policy.BlockThreshold, d.Policy.LateRatio, d.Policy.MaxHold)
}

// canSleep reports whether waiting wait leaves DeadlineMargin before ctx's
// deadline (a Lambda invocation's end) and stays within t's hold.
func (d *Dispatcher) canSleep(ctx context.Context, t *task, wait time.Duration) bool {
	return d.sleepBound(ctx, t).can(d.now(), wait)
}

// sleepBound is what the call lets t's job sleep: its hold, and
// DeadlineMargin before ctx's deadline.
func (d *Dispatcher) sleepBound(ctx context.Context, t *task) sleepBound {
	b := sleepBound{Margin: d.Policy.DeadlineMargin, Hold: t.hold}
	b.Deadline, _ = ctx.Deadline()
	return b
}
