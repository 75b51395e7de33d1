package dispatch

import "time"

// decideSlot says what to do with a job that holds a slot to use: one
// booked in this call, one carried in within its grace, or one its work
// was begun for (a slot past its grace otherwise is decide's: dropped and
// booked again). Its plan is one step, or, for work still to begin before
// the slot, the begin with Slot set: decideSlot is asked again once it is
// done. In order: a slot its work was begun for that passed its grace
// meanwhile (push now); a shadow route (push now, recording what
// enforcement would do); a slot beyond blocking distance or the call's
// hold (defer, to come back early by the lead); work to begin (begin it
// PrepLead before the slot); otherwise sleep to the slot, confirm a
// stamped one, and push.
func decideSlot(s situation) plan {
	p := plan{Until: s.until(), StoreFailing: s.StoreFailing}
	d := s.atSlot()
	p.Steps, p.Slot = []decision{d}, d.Act == actPrepare
	return p
}

// atSlot is the step decideSlot plans.
func (s situation) atSlot() decision {
	j, now := s.Job, s.Now
	if !s.Booked && s.expired() {
		// Its work took longer to begin than it was given: the push goes
		// now, and the request books a fresh token as it leaves
		// (spendable), as any push reaching its slot late does. Booked
		// again here, a store this slow would make every slot late and the
		// job loop through the queue, claiming each time.
		return decision{Act: actPush}
	}
	prepare := s.Prepares && !s.Prepared && !s.Shadow
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
		return decision{Act: actDefer, Wait: earlyBy(wait, lead), Reason: "waiting for its reserved slot"}
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

// earlyBy is the deferral that brings a job back at least lead before a
// slot wait away. The queue delays by whole seconds, rounded up so that a
// job never comes back before its wait (queue.Delay): 4.4 s would go as
// 5 s, back 0.4 s early rather than by the lead, and a delivery later
// than that misses a slot whose grace is the default 100 ms margin: the
// slot is wasted and booked again behind every slot booked since.
// So the wait goes in the whole seconds that keep the lead. Under a
// second left, it stays as it is: no delay would bring the job straight
// back to defer again, and the second it goes as still comes back before
// the slot while BlockThreshold, the lead's floor, is a second or more
// (its default).
func earlyBy(wait, lead time.Duration) time.Duration {
	early := max(wait-lead, 0)
	if whole := early.Truncate(time.Second); whole > 0 {
		return whole
	}
	return early
}
