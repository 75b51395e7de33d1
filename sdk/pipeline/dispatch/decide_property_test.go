package dispatch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// TestDecideProperties drives decide through random sequences of
// situations, as serve would meet them one after the other: it takes each
// plan's steps in turn, with random outcomes, asking decide again (or
// decideSlot, for a slot booked or begun for) where serve would. It
// checks every step, against the situation as it stands when the step is
// taken, for what must hold whatever the sequence:
//   - never a push without a token: a push holds a slot;
//   - never a slot used later than its grace: a slot carried in is pushed
//     no later than its grace after it (one booked in the call, or one
//     whose work was begun for it, is checked at the request instead:
//     spendable books a fresh token for a late request);
//   - never a deferral past a deadline: a job is never deferred to come
//     back past its deadline or its max age while it could still be
//     served before them (a job that cannot is dead-lettered, not
//     deferred);
//   - never a lane's changes dropped: decide never ends a job that holds
//     work as coalesced (only the work itself says it has nothing to send:
//     decideBegin), and a job it ends goes to the dead-letter queue as
//     expired or shed, with its reason, so that its work is given up
//     (Work.Abandon) and stays pending;
//   - never a token booked first while the route's lease set is crowded
//     (it would pass its grace in the wait for a lease; a shadow route's
//     too, which would begin its push before a refused lease), never a
//     lease taken first before the push is counted among those going
//     for one, or twice; never a lease held over a slot
//     further off than its grace (the vendor's concurrency would idle);
//   - a quota route's refused take (decideQuota) sleeps only for its
//     next token, never for a spent quota, and never past the call's
//     bounds, its deadline or its max age; it defers a job only to come
//     back before them, and ends one only when the wait would not;
//   - a plan ends at its first step that ends the call's hold on the job
//     or learns what it could not know, books at most one slot, and holds
//     no later than the job's deadline and max age while those are
//     checked (its steps are then checked at the clock's reading when
//     they are taken, not when the plan was made);
//   - the sequence ends: every job is pushed, deferred or dead-lettered
//     within a bounded number of steps.
//
// The oracle is the list above, written against the situation's values;
// it shares no code with decide. The seeds are fixed: a failure prints the
// seed and the sequence, which replay.
func TestDecideProperties(t *testing.T) {
	const seeds, maxSteps = 3000, 40
	for seed := uint64(1); seed <= seeds; seed++ {
		if trail, err := decideSequence(seed, maxSteps); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, strings.Join(trail, "\n"))
		}
	}
}

// decideSequence plays one random sequence: a job drawn from seed, its
// situation changed after each decision as serve would change it, with
// random lateness, grants and refusals in between.
func decideSequence(seed uint64, maxSteps int) (trail []string, _ error) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	t0 := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	dur := func(max time.Duration) time.Duration { return time.Duration(r.Int64N(int64(max) + 1)) }
	maybe := func(p float64) bool { return r.Float64() < p }

	s := situation{
		Now:    t0,
		MaxAge: []time.Duration{time.Minute, 10 * time.Minute, 24 * time.Hour}[r.IntN(3)],
		Grace:  100*time.Millisecond + dur(2*time.Second),
		Early:  100 * time.Millisecond,
		Lead:   leadRule{Floor: time.Second, Ratio: 0.1 * r.Float64()},
		Shadow: maybe(0.15),
	}
	s.Job = job.Job{ID: fmt.Sprintf("job-%d", seed), FirstSeen: t0.Add(-dur(s.MaxAge))}
	if maybe(0.3) {
		s.Job.Deadline = t0.Add(dur(2*time.Minute) - 10*time.Second)
	}
	if maybe(0.4) {
		s.Job.NotBefore = t0.Add(dur(5 * time.Second))
		s.Job.Linger = maybe(0.5)
		if s.Job.Linger {
			// As lingerReach bounds it: within the linger, the deadline
			// and the max age.
			reach := dur(s.Job.NotBefore.Sub(t0))
			if !s.Job.Deadline.IsZero() {
				reach = min(reach, s.Job.Deadline.Sub(t0))
			}
			s.LingerReach = max(min(reach, s.Job.FirstSeen.Add(s.MaxAge).Sub(t0)), 0)
		}
	}
	if maybe(0.4) {
		// A job holding a slot is due at it: booking clears NotBefore.
		s.Job.NotBefore, s.Job.Linger, s.LingerReach = time.Time{}, false, 0
		s.Job.Hold = job.Hold{At: t0.Add(dur(40*time.Second) - 5*time.Second), Tokens: 1}
		if maybe(0.2) {
			s.Job.Hold.Grant = job.Grant{Version: 1, Interval: 100_000}
		}
	}
	s.Rechecks = !s.Job.Hold.Held() && maybe(0.2)
	// A job a push hands back is the work's next, made with no slot; one
	// it books as it lingers it holds as one carried in (not Booked).
	s.Next = maybe(0.1)
	if maybe(0.5) {
		s.Sleep.Hold = t0.Add(dur(10 * time.Second))
	}
	if maybe(0.3) {
		s.Sleep.Deadline, s.Sleep.Margin = t0.Add(dur(30*time.Second)), 3*time.Second
	}
	s.Lease.Gated = maybe(0.4)
	s.Prepares = maybe(0.4)
	s.PrepLead = dur(500 * time.Millisecond)
	s.StoreFailing = maybe(0.2)
	quota := maybe(0.3)
	// carried is the hold the job came in with, checked for grace; nil
	// once the call books its own.
	carried := s.Job.Hold.Held()

	var p plan
	next := 0
	for step := 0; step < maxSteps; step++ {
		if next >= len(p.Steps) || !p.holds(s.Now, s.StoreFailing) {
			if s.Lease.Joined {
				s.Lease.Crowded = maybe(0.5) // read again before every plan
			}
			if p.Slot && p.holds(s.Now, s.StoreFailing) {
				p = decideSlot(s)
			} else {
				p = decide(s)
			}
			next = 0
			trail = append(trail, fmt.Sprintf("  plan of %d steps until %v, slot=%v", len(p.Steps), at(p.Until, t0), p.Slot))
			if err := checkPlan(s, p); err != nil {
				return trail, err
			}
		}
		d := p.Steps[next]
		next++
		d.Hold.apply(&s.Job)
		if d.IfCrowded {
			if s.Lease.Crowded = maybe(0.5); !s.Lease.Crowded {
				trail = append(trail, fmt.Sprintf("  %2d %s skipped: the lease set is not crowded", step, d.Act))
				continue
			}
		}
		trail = append(trail, fmt.Sprintf("  %2d now+%v hold=%v notBefore=%v owned=%v booked=%v prepared=%v lingerAsked=%v: %s wait=%v %s",
			step, s.Now.Sub(t0), holdAt(s.Job.Hold, t0), at(s.Job.NotBefore, t0), s.Owned, s.Booked, s.Prepared, s.LingerAsked, d.Act, d.Wait, d.Reason))
		if d.Hold.drop {
			d.Hold = holding{} // dropped above, as serve does before the step
		}
		if err := checkDecision(s, d, carried); err != nil {
			return trail, err
		}
		if maybe(0.05) {
			s.StoreFailing = !s.StoreFailing // another job's reservation
		}
		switch d.Act {
		case actPush, actDefer, actDeadLetter:
			return trail, nil // the call's hold on the job ends
		case actBookLinger:
			s.LingerAsked = true
			if maybe(0.5) { // granted: the job pushes at the early slot
				s.Job.Hold, s.Job.NotBefore = job.Hold{At: s.Now.Add(dur(d.Wait)), Tokens: 1}, time.Time{}
				s.Now = s.Now.Add(dur(5 * time.Millisecond))
				carried = false
				s.Booked = true
			}
		case actSleep:
			s.Now = s.Now.Add(d.Wait + dur(3*time.Millisecond))
			s.Job.NotBefore = time.Time{}
		case actRecheck:
			if maybe(0.5) {
				return trail, nil // told to come back: decideBegin's, not decide's
			}
			s.Owned, s.Rechecks, s.Prepared = true, false, true
			s.Now = s.Now.Add(dur(50 * time.Millisecond))
		case actPrepare:
			if maybe(0.1) {
				return trail, nil // nothing to push, or told to come back: decideBegin's
			}
			// Slept to its time, then the claim and the render, which may
			// take longer than they were given.
			s.Now = s.Now.Add(d.Wait + dur(time.Second))
			s.Prepared = true
		case actJoinLease:
			s.Lease.Joined = true
		case actLeaseFirst:
			if maybe(0.2) {
				return trail, nil // no lease within the hold: leaseRefused's
			}
			s.Lease.Held = true
			s.Now = s.Now.Add(dur(2 * time.Second)) // the wait for a lease
		case actReserve:
			if quota && maybe(0.4) {
				q := quotaRefusal{Err: []error{
					&limiter.ExhaustedError{RetryAfter: dur(2 * time.Second)},
					&limiter.ExhaustedError{RetryAfter: dur(3 * time.Hour)},
					limiter.ErrContended, limiter.ErrUnavailable,
				}[r.IntN(4)], Now: s.Now, Sleep: s.Sleep, Deadline: s.Job.Deadline, FirstSeen: s.Job.FirstSeen, MaxAge: s.MaxAge, Cooldown: 10 * time.Second}
				q.Spent = maybe(0.5)
				dq := decideQuota(q)
				trail = append(trail, fmt.Sprintf("      quota refused (%v, spent=%v): %s wait=%v %s", q.Err, q.Spent, dq.Act, dq.Wait, dq.Reason))
				if err := checkQuota(q, dq); err != nil {
					return trail, err
				}
				if dq.Act != actSleep {
					return trail, nil
				}
				// Slept for the token with the lease freed; reserve asks again.
				s.Now, s.Lease.Held = s.Now.Add(dq.Wait+dur(3*time.Millisecond)), false
				p = plan{} // decide asked again, as it was before plans
				continue
			}
			if maybe(0.2) {
				return trail, nil // refused: decideRefusal's
			}
			// Booked at or after the clock's reading, within the bounds
			// reserve gives it (its deadline and max age).
			end := s.Now.Add(15 * time.Minute)
			if !s.Job.Deadline.IsZero() && s.Job.Deadline.Before(end) {
				end = s.Job.Deadline
			}
			if lastAge := s.Job.FirstSeen.Add(s.MaxAge); lastAge.Before(end) {
				end = lastAge
			}
			if !end.After(s.Now) {
				return trail, nil // no slot before the bound: unbookable
			}
			s.Job.Hold = job.Hold{At: s.Now.Add(dur(min(end.Sub(s.Now), time.Minute))), Tokens: 1}
			s.Now = s.Now.Add(dur(300 * time.Millisecond)) // the write's latency, a lease awaited
			s.Booked, carried = true, false
		default:
			return trail, fmt.Errorf("decide said %s, which serve does not carry out", d.Act)
		}
	}
	return trail, errors.New("no push, deferral or dead letter within the steps")
}

// checkPlan is the oracle of a plan's shape: where it must end, what it
// books, and how long it may hold, in s.
func checkPlan(s situation, p plan) error {
	if len(p.Steps) == 0 {
		return errors.New("a plan of no steps")
	}
	reserves := 0
	for i, d := range p.Steps {
		last := i == len(p.Steps)-1
		switch d.Act {
		case actPush, actDefer, actDeadLetter, actBookLinger, actSleep, actRecheck, actRevoke:
			if !last {
				return fmt.Errorf("step %d of %d is %s, which ends the plan", i+1, len(p.Steps), d.Act)
			}
		case actReserve:
			if reserves++; reserves > 1 {
				return errors.New("a plan that books twice")
			}
			if !last {
				return fmt.Errorf("steps after the booking (%d of %d), whose slot the plan cannot know", i+1, len(p.Steps))
			}
		case actLeaseFirst:
			if d.IfCrowded && (i == 0 || p.Steps[i-1].Act != actJoinLease) {
				return errors.New("a lease-first step that waits for crowding with no join before it")
			}
		}
	}
	lastAct := p.Steps[len(p.Steps)-1].Act
	if p.Slot && lastAct != actReserve && lastAct != actPrepare {
		return fmt.Errorf("a plan that leaves a slot to use after %s", lastAct)
	}
	if p.Slot != (lastAct == actReserve) && lastAct != actPrepare {
		return fmt.Errorf("a plan that books and leaves no slot to use (slot=%v, last %s)", p.Slot, lastAct)
	}
	if !s.Owned && !s.Booked && (len(p.Steps) > 1 || p.Slot) {
		end := s.Job.FirstSeen.Add(s.MaxAge)
		if !s.Job.Deadline.IsZero() && s.Job.Deadline.Before(end) {
			end = s.Job.Deadline
		}
		if p.Until.IsZero() || p.Until.After(end) {
			return fmt.Errorf("a plan of %d steps holding until %v, past its deadline or max age %v", len(p.Steps), p.Until, end)
		}
	}
	return nil
}

// checkDecision is the oracle: what d may never do in s.
func checkDecision(s situation, d decision, carried bool) error {
	j := s.Job
	over := !s.Now.Before(j.FirstSeen.Add(s.MaxAge)) || (!j.Deadline.IsZero() && !s.Now.Before(j.Deadline))
	if over && !s.Owned && !s.Booked && d.Act != actDeadLetter {
		// Checked once per call, before the job's work or a slot is
		// taken: past them, nothing more is spent on it.
		return fmt.Errorf("%s at %v, past its deadline %v or its max age (from %v): it must be dead-lettered", d.Act, s.Now, j.Deadline, j.FirstSeen)
	}
	switch d.Act {
	case actPush:
		if !j.Hold.Held() {
			return errors.New("a push without a token")
		}
		if pushAt := maxTime(s.Now.Add(d.Wait), j.Hold.At); carried && !s.Shadow && !s.Prepared && pushAt.After(j.Hold.At.Add(s.Grace)) {
			return fmt.Errorf("the slot %v is used at %v, past its grace %v", j.Hold.At, pushAt, s.Grace)
		}
		if d.Wait < 0 {
			return fmt.Errorf("a push after a negative wait %v", d.Wait)
		}
	case actDefer:
		back := s.Now.Add(d.Wait)
		if d.Wait < 0 {
			return fmt.Errorf("a deferral of a negative wait %v", d.Wait)
		}
		if !j.Deadline.IsZero() && !s.Now.Before(j.Deadline) {
			return fmt.Errorf("deferred at %v, past its deadline %v: it must be shed", s.Now, j.Deadline)
		}
		if !s.Now.Before(j.FirstSeen.Add(s.MaxAge)) {
			return fmt.Errorf("deferred at %v, past its max age: it must expire", s.Now)
		}
		if j.Hold.Held() && back.After(j.Hold.At) {
			// Its slot would pass on the queue, and with a deadline the
			// job would come back past what it had booked before it.
			return fmt.Errorf("deferred with its slot %v to come back at %v, after the slot", j.Hold.At, back)
		}
	case actDeadLetter:
		if d.Outcome != Expired && d.Outcome != Shed {
			return fmt.Errorf("dead-lettered as %q: decide ends a job only expired or shed", d.Outcome)
		}
		if d.Reason == "" {
			return errors.New("dead-lettered with no reason")
		}
		expired := !s.Now.Before(j.FirstSeen.Add(s.MaxAge))
		shed := !j.Deadline.IsZero() && !s.Now.Before(j.Deadline)
		if !expired && !shed {
			return fmt.Errorf("dead-lettered as %s at %v before its deadline and its max age", d.Outcome, s.Now)
		}
	case actCoalesce:
		return errors.New("decide dropped the job (coalesced): only its work may say it has nothing to send")
	case actJoinLease:
		if !s.Lease.Gated || s.Lease.Joined {
			return fmt.Errorf("joined the lease's pushes with gated=%v joined=%v", s.Lease.Gated, s.Lease.Joined)
		}
	case actLeaseFirst:
		switch {
		case !s.Lease.Gated || !s.Lease.Joined:
			return errors.New("a lease taken first before the push is counted among those going for one")
		case s.Lease.Held:
			return errors.New("a second lease taken first")
		case !s.Lease.Crowded:
			return errors.New("a lease taken first while the lease set is free")
		case j.Hold.Held() && !d.Hold.drop:
			return errors.New("a lease taken first by a job holding a slot")
		}
	case actReserve:
		if s.Lease.Gated && s.Lease.Crowded && !s.Lease.Held {
			return errors.New("a token booked first while the lease set is crowded")
		}
	}
	if d.Act == actPush && !d.Shadow && s.Lease.Held && j.Hold.At.Sub(s.Now) > s.Grace && !d.FreeLease {
		return fmt.Errorf("a lease held over a slot %v ahead, beyond its grace %v", j.Hold.At.Sub(s.Now), s.Grace)
	}
	return nil
}

// checkQuota is the oracle of a quota route's refused take: what d may
// never do for q.
func checkQuota(q quotaRefusal, d decision) error {
	var ex *limiter.ExhaustedError
	denied := errors.As(q.Err, &ex)
	back := q.Now
	if denied {
		back = back.Add(ex.RetryAfter)
	}
	end := q.FirstSeen.Add(q.MaxAge)
	pastDeadline := !q.Deadline.IsZero() && !back.Before(q.Deadline)
	switch d.Act {
	case actSleep:
		switch {
		case !denied:
			return fmt.Errorf("slept for %v", q.Err)
		case q.Spent:
			return errors.New("slept for a spent quota's reset")
		case d.Wait != ex.RetryAfter:
			return fmt.Errorf("slept %v for a token %v off", d.Wait, ex.RetryAfter)
		case !q.Sleep.Hold.IsZero() && back.After(q.Sleep.Hold):
			return fmt.Errorf("slept to %v, past the call's hold %v", back, q.Sleep.Hold)
		case !q.Sleep.Deadline.IsZero() && back.Add(q.Sleep.Margin).After(q.Sleep.Deadline):
			return fmt.Errorf("slept to %v, into the invocation's margin before %v", back, q.Sleep.Deadline)
		case pastDeadline || !back.Before(end):
			return fmt.Errorf("slept to %v, past its deadline %v or max age (to %v)", back, q.Deadline, end)
		}
	case actDefer:
		if pastDeadline || !back.Before(end) {
			return fmt.Errorf("deferred to %v, past its deadline %v or max age (to %v): it must end", back, q.Deadline, end)
		}
		if d.Wait != back.Sub(q.Now) && d.Wait != q.Cooldown && d.Wait != 0 {
			return fmt.Errorf("deferred %v, neither to the next token or reset, nor for the cooldown", d.Wait)
		}
	case actDeadLetter:
		if !denied && !errors.Is(q.Err, limiter.ErrInvalidArgument) {
			return fmt.Errorf("dead-lettered for %v", q.Err)
		}
		if !pastDeadline && back.Before(end) {
			return fmt.Errorf("dead-lettered as %s though its wait ends at %v, before its deadline and max age", d.Outcome, back)
		}
	default:
		return fmt.Errorf("decideQuota said %s", d.Act)
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func holdAt(h job.Hold, t0 time.Time) string {
	if !h.Held() {
		return "-"
	}
	return h.At.Sub(t0).String()
}

func at(t, t0 time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(t0).String()
}
