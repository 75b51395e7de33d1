package dispatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// TestDecide covers every action decide takes first, with the clock, the
// job and the call's bounds as values: no limiter, queue or vendor is
// involved. TestDecidePlans covers the steps that follow.
func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	base := func() situation {
		return situation{
			Job:    job.Job{ID: "j", FirstSeen: t0.Add(-time.Minute)},
			Now:    t0,
			MaxAge: 24 * time.Hour, Grace: 2 * time.Second, Early: 100 * time.Millisecond,
			Lead: leadRule{Floor: time.Second, Ratio: 0.1},
		}
	}
	held := func(at time.Duration) job.Hold { return job.Hold{At: t0.Add(at)} }
	tests := []struct {
		name string
		edit func(*situation)
		want decision
	}{
		{"no hold: reserve", func(*situation) {}, decision{Act: actReserve}},
		{"slot now: push", func(s *situation) { s.Job.Hold = held(0) }, decision{Act: actPush}},
		{"slot within blocking distance: sleep to it and push", func(s *situation) { s.Job.Hold = held(800 * time.Millisecond) },
			decision{Act: actPush, Wait: 800 * time.Millisecond}},
		{"stamped slot: confirm it early", func(s *situation) {
			s.Job.Hold = held(800 * time.Millisecond)
			s.Job.Hold.Grant = job.Grant{Version: 3, Interval: 100_000}
		}, decision{Act: actPush, Wait: 700 * time.Millisecond, Confirm: true}},
		{"slot booked ahead: woken Silence before it, so that the silence read delays the check, not the send", func(s *situation) {
			s.Job.Hold, s.Silence = held(800*time.Millisecond), 100*time.Millisecond
			s.Job.Hold.Ahead = true
		}, decision{Act: actPush, Wait: 700 * time.Millisecond}},
		{"work to begin, no hold: begin it before booking", func(s *situation) { s.Prepares = true }, decision{Act: actPrepare}},
		{"work to begin, the limiter's store failing: book first", func(s *situation) { s.Prepares, s.StoreFailing = true, true },
			decision{Act: actReserve}},
		{"work begun, no hold: reserve", func(s *situation) { s.Prepares, s.Prepared = true, true }, decision{Act: actReserve}},
		{"work to begin, slot within blocking distance: begin it PrepLead before the slot", func(s *situation) {
			s.Job.Hold, s.Prepares, s.PrepLead = held(800*time.Millisecond), true, 300*time.Millisecond
		}, decision{Act: actPrepare, Wait: 500 * time.Millisecond}},
		{"work to begin, slot past blocking distance by less than PrepLead: kept, to begin it in time", func(s *situation) {
			s.Job.Hold, s.Prepares, s.PrepLead = held(1200*time.Millisecond), true, 300*time.Millisecond
		}, decision{Act: actPrepare, Wait: 900 * time.Millisecond}},
		{"work to begin, hold expired past grace: drop it (wasted) and begin first", func(s *situation) {
			s.Job.Hold, s.Prepares = held(-3*time.Second), true
		}, decision{Act: actPrepare, Hold: dropped}},
		{"work begun, its slot passed its grace meanwhile: push (on a fresh token), not book and defer again", func(s *situation) {
			s.Job.Hold, s.Prepares, s.Prepared = held(-3*time.Second), true, true
		}, decision{Act: actPush}},
		{"work begun for its slot, past the call's hold: push after the rest of the wait", func(s *situation) {
			s.Job.Hold, s.Prepares, s.Prepared, s.PrepLead = held(200*time.Millisecond), true, true, 300*time.Millisecond
			s.Sleep.Hold = t0.Add(-time.Second)
		}, decision{Act: actPush, Wait: 200 * time.Millisecond}},
		{"slot beyond blocking distance: defer to come back early by the lead", func(s *situation) { s.Job.Hold = held(30 * time.Second) },
			decision{Act: actDefer, Wait: 27 * time.Second, Reason: "waiting for its reserved slot"}},
		{"slot beyond blocking distance by a fraction past whole seconds: the delay the queue rounds up still comes back by the lead", func(s *situation) {
			s.Job.Hold, s.Lead = held(5400*time.Millisecond), leadRule{Floor: time.Second}
		}, decision{Act: actDefer, Wait: 4 * time.Second, Reason: "waiting for its reserved slot"}},
		{"slot beyond blocking distance by under a second: deferred what is left, as no delay would bring it straight back", func(s *situation) {
			s.Job.Hold, s.Lead = held(1500*time.Millisecond), leadRule{Floor: time.Second}
		}, decision{Act: actDefer, Wait: 500 * time.Millisecond, Reason: "waiting for its reserved slot"}},
		{"slot past the call's hold: defer, all of the wait slept elsewhere", func(s *situation) {
			s.Job.Hold, s.Sleep.Hold = held(800*time.Millisecond), t0.Add(500*time.Millisecond)
		}, decision{Act: actDefer, Wait: 0, Reason: "waiting for its reserved slot"}},
		{"slot into the invocation's deadline margin: defer", func(s *situation) {
			s.Job.Hold, s.Sleep.Deadline, s.Sleep.Margin = held(800*time.Millisecond), t0.Add(3*time.Second), 3*time.Second
		}, decision{Act: actDefer, Wait: 0, Reason: "waiting for its reserved slot"}},
		{"hold expired past grace: drop it (wasted) and reserve", func(s *situation) { s.Job.Hold = held(-3 * time.Second) },
			decision{Act: actReserve, Hold: dropped}},
		{"hold late within grace: push", func(s *situation) { s.Job.Hold = held(-time.Second) }, decision{Act: actPush}},
		{"slot within blocking distance but further off than its grace: a lease taken first goes back", func(s *situation) {
			s.Job.Hold, s.Grace = held(800*time.Millisecond), 500*time.Millisecond
		}, decision{Act: actPush, Wait: 800 * time.Millisecond, FreeLease: true}},
		{"slot revoked by a throttle: drop it and start over", func(s *situation) { s.Job.Hold, s.Revoked = held(0), true },
			decision{Act: actRevoke}},
		{"past the deadline while not due yet: shed now, not deferred to be shed", func(s *situation) {
			s.Job.NotBefore, s.Job.Deadline = t0.Add(30*time.Second), t0.Add(-time.Second)
		}, decision{Act: actDeadLetter, Outcome: Shed, Reason: "deadline 2026-12-01T11:59:59Z passed before the push"}},
		{"hold booked in this call is not checked for grace", func(s *situation) { s.Job.Hold, s.Booked = held(-3*time.Second), true },
			decision{Act: actPush}},
		{"shadow: push now, and record that enforcement would defer", func(s *situation) { s.Shadow, s.Job.Hold = true, held(30*time.Second) },
			decision{Act: actPush, Shadow: true, ShadowWait: 30 * time.Second, ShadowWouldDefer: true}},
		{"handed back past the call's hold: defer before booking a slot", func(s *situation) {
			s.Next, s.Sleep.Hold = true, t0.Add(-time.Millisecond)
		}, decision{Act: actDefer, Reason: handedBackLate}},
		{"handed back past the call's hold on a shadow route: defer as enforcement does", func(s *situation) {
			s.Next, s.Shadow, s.Sleep.Hold = true, true, t0.Add(-time.Millisecond)
		}, decision{Act: actDefer, Reason: handedBackLate}},
		{"handed back past the call's hold, not due yet: defer to when it is", func(s *situation) {
			s.Next, s.Sleep.Hold, s.Job.NotBefore = true, t0.Add(-time.Millisecond), t0.Add(200*time.Millisecond)
		}, decision{Act: actDefer, Wait: 200 * time.Millisecond, Reason: handedBackLate}},
		{"handed back into the invocation's deadline margin: defer", func(s *situation) {
			s.Next, s.Sleep.Deadline, s.Sleep.Margin = true, t0.Add(2*time.Second), 3*time.Second
		}, decision{Act: actDefer, Reason: handedBackLate}},
		{"handed back within the call's hold: reserve as any job", func(s *situation) {
			s.Next, s.Sleep.Hold = true, t0.Add(time.Second)
		}, decision{Act: actReserve}},
		{"handed back at the end of the call's hold: reserve", func(s *situation) {
			s.Next, s.Sleep.Hold = true, t0
		}, decision{Act: actReserve}},
		{"not the call's first job but its slot booked here: push", func(s *situation) {
			s.Next, s.Booked, s.Sleep.Hold, s.Job.Hold = true, true, t0.Add(-time.Millisecond), held(0)
		}, decision{Act: actPush}},
		{"shadow, short wait: push now, would have slept", func(s *situation) { s.Shadow, s.Job.Hold = true, held(300*time.Millisecond) },
			decision{Act: actPush, Shadow: true, ShadowWait: 300 * time.Millisecond}},
		{"not due, short wait: sleep", func(s *situation) { s.Job.NotBefore = t0.Add(500 * time.Millisecond) },
			decision{Act: actSleep, Wait: 500 * time.Millisecond}},
		{"not due, long wait: defer the rest", func(s *situation) { s.Job.NotBefore = t0.Add(time.Minute) },
			decision{Act: actDefer, Wait: time.Minute, Reason: "not due yet"}},
		{"not due, past the call's hold: defer", func(s *situation) {
			s.Job.NotBefore, s.Sleep.Hold = t0.Add(500*time.Millisecond), t0.Add(100*time.Millisecond)
		}, decision{Act: actDefer, Wait: 500 * time.Millisecond, Reason: "not due yet"}},
		{"lingering, its bucket fills first: book its early slot", func(s *situation) {
			s.Job.NotBefore, s.Job.Linger, s.LingerReach = t0.Add(time.Minute), true, 2*time.Second
		}, decision{Act: actBookLinger, Wait: 2 * time.Second}},
		{"lingering, early slot denied: defer as any job not due", func(s *situation) {
			s.Job.NotBefore, s.Job.Linger, s.LingerReach, s.LingerAsked = t0.Add(time.Minute), true, 2*time.Second, true
		}, decision{Act: actDefer, Wait: time.Minute, Reason: "not due yet"}},
		{"past its max age: expire", func(s *situation) { s.Job.FirstSeen = t0.Add(-25 * time.Hour) },
			decision{Act: actDeadLetter, Outcome: Expired, Reason: "expired: first seen 2026-11-30T11:00:00Z, over its max_age 24h0m0s ago"}},
		{"past its deadline: shed", func(s *situation) { s.Job.Deadline, s.Job.Hold = t0, held(0) },
			decision{Act: actDeadLetter, Outcome: Shed, Reason: "deadline 2026-12-01T12:00:00Z passed before the push"}},
		{"due, but its max age passed meanwhile: expire", func(s *situation) {
			s.Job.FirstSeen, s.Job.NotBefore = t0.Add(-24*time.Hour), t0.Add(-time.Second)
		}, decision{Act: actDeadLetter, Outcome: Expired, Reason: "expired: first seen 2026-11-30T12:00:00Z, over its max_age 24h0m0s ago"}},
		{"rechecks its work, no slot: begin it first", func(s *situation) { s.Rechecks = true }, decision{Act: actRecheck}},
		{"rechecks but holds a slot: push", func(s *situation) { s.Rechecks, s.Job.Hold = true, held(0) }, decision{Act: actPush}},
		{"owned after a recheck: reserve without checking again", func(s *situation) {
			s.Owned, s.Rechecks, s.Job.Deadline = true, true, t0.Add(-time.Second)
		}, decision{Act: actReserve}},
		{"a route with in-flight leases: count the push among those going for one first", func(s *situation) {
			s.Lease.Gated = true
		}, decision{Act: actJoinLease}},
		{"lease set free: the token first", func(s *situation) {
			s.Lease = leaseState{Gated: true, Joined: true}
		}, decision{Act: actReserve}},
		{"lease set crowded: the lease first", func(s *situation) {
			s.Lease = leaseState{Gated: true, Joined: true, Crowded: true}
		}, decision{Act: actLeaseFirst}},
		{"lease set crowded, hold expired: drop it, then the lease first", func(s *situation) {
			s.Lease, s.Job.Hold = leaseState{Gated: true, Joined: true, Crowded: true}, held(-3*time.Second)
		}, decision{Act: actLeaseFirst, Hold: dropped}},
		{"lease set crowded, the lease taken: book the token", func(s *situation) {
			s.Lease = leaseState{Gated: true, Joined: true, Crowded: true, Held: true}
		}, decision{Act: actReserve}},
		{"lease set crowded on a shadow route: the lease first (its token never waits)", func(s *situation) {
			s.Lease, s.Shadow = leaseState{Gated: true, Joined: true, Crowded: true}, true
		}, decision{Act: actLeaseFirst}},
		{"lease set crowded, a slot held: push (its lease is taken at the slot)", func(s *situation) {
			s.Lease, s.Job.Hold = leaseState{Gated: true, Joined: true, Crowded: true}, held(0)
		}, decision{Act: actPush}},
	}
	seen := map[action]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.edit(&s)
			got := decide(s).Steps[0]
			if got != tt.want {
				t.Fatalf("decide's first step = %+v (%v), want %+v (%v)", got, got.Act, tt.want, tt.want.Act)
			}
			seen[got.Act] = true
		})
	}
	for _, a := range []action{actBookLinger, actSleep, actDefer, actDeadLetter, actRecheck, actReserve, actPush, actRevoke, actJoinLease, actLeaseFirst, actPrepare} {
		// actCoalesce: TestDecideBegin; actLocalShare: TestDecideRefusal
		if !seen[a] {
			t.Errorf("no case decides %v", a)
		}
	}
}

// TestDecideFailure covers what becomes of a job whose push failed, for
// each kind of failure, with its count of failures as a value.
func TestDecideFailure(t *testing.T) {
	p := DefaultPolicy // MaxFailures 8, FailureBackoff 2 s, StoreCooldown 10 s
	refused := &otapush.PermanentError{Status: 401, Summary: "bad token"}
	bad := &otapush.PermanentError{Status: 400, Summary: "no such room"}
	loginIn200 := &otapush.PermanentError{Status: 200, Summary: "1001: invalid username or password", Scope: otapush.ScopeCredential}
	hotel := &otapush.PermanentError{Status: 403, Summary: "no access to hotel 1000001", Scope: otapush.ScopeHotel}
	tests := []struct {
		name      string
		f         failure
		want      decision
		notVendor bool
	}{
		{"credential refused, a new token: again at once", failure{Err: refused, Failures: 0, Refreshed: true},
			decision{Act: actDefer, Reason: "credential refreshed after " + refused.Error(), CountFailure: true}, false},
		{"credential refused, no new token: pause its bucket for the backoff", failure{Err: refused, Failures: 2},
			decision{Act: actDefer, Wait: 8 * time.Second, Reason: "credential refused, its pushes paused: " + refused.Error(),
				CountFailure: true, Pause: true, CredentialRefused: true}, false},
		{"credential refused past MaxFailures: dead-letter, a new token or not", failure{Err: refused, Failures: 8, Refreshed: true},
			decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: "credential refused 9 times in a row: " + refused.Error(), CredentialRefused: true}, false},
		{"credential refused inside a 200: pause its bucket as a 401 does", failure{Err: loginIn200, Failures: 0},
			decision{Act: actDefer, Wait: 2 * time.Second, Reason: "credential refused, its pushes paused: " + loginIn200.Error(),
				CountFailure: true, Pause: true, CredentialRefused: true}, false},
		{"hotel refused: the lane waits out the backoff, the bucket stays open", failure{Err: hotel, Failures: 2},
			decision{Act: actDefer, Wait: 8 * time.Second, Reason: "hotel refused, its lane paused: " + hotel.Error(), CountFailure: true, HotelRefused: true}, false},
		{"hotel refused past MaxFailures: dead-letter the job (its work kept)", failure{Err: hotel, Failures: 8},
			decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: "hotel refused 9 times in a row: " + hotel.Error(), HotelRefused: true}, false},
		{"refused for good: dead-letter", failure{Err: bad},
			decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: bad.Error()}, false},
		{"the limiter's store failed: back after the cooldown, not counted", failure{Err: &otapush.DeferError{Cause: limiter.ErrUnavailable}, Failures: 8},
			decision{Act: actDefer, Wait: 10 * time.Second, Reason: (&otapush.DeferError{Cause: limiter.ErrUnavailable}).Error(), StoreError: true, ReportSlot: true}, false},
		{"a transient failure: back off, at least what the vendor asked", failure{Err: &otapush.DeferError{After: 30 * time.Second}, Failures: 1},
			decision{Act: actDefer, Wait: 30 * time.Second, Reason: (&otapush.DeferError{After: 30 * time.Second}).Error(), CountFailure: true, ReportSlot: true}, false},
		{"a transient failure: the backoff doubles (2 s · 2^7 for the 8th)", failure{Err: &otapush.DeferError{}, Failures: 7},
			decision{Act: actDefer, Wait: 256 * time.Second, Reason: (&otapush.DeferError{}).Error(), CountFailure: true, ReportSlot: true}, false},
		{"a transient failure past MaxFailures: give up", failure{Err: &otapush.DeferError{}, Failures: 8},
			decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: "gave up after 9 failed pushes in a row: " + (&otapush.DeferError{}).Error()}, false},
		// Adversary seed 84: a lane's job throttled to the end of 9 pushes
		// was dead-lettered, naming no change, and its days stayed stale.
		// Adversary seed 63: a slow vendor's lane job counted the pushes it
		// lost to a vendor's in-flight cap (a 429, then no token within its
		// 2 s budget) with its timeouts, gave up after 9 and left its lane
		// to the sweep's 15-minute backoff.
		{"throttled past MaxFailures: back off as far as its failures, never give up, not counted", failure{Err: &otapush.DeferError{Throttled: true, Status: 429}, Failures: 8},
			decision{Act: actDefer, Wait: 512 * time.Second, Reason: (&otapush.DeferError{Throttled: true, Status: 429}).Error(), ReportSlot: true}, false},
		{"throttled, at least what the vendor asked", failure{Err: &otapush.DeferError{Throttled: true, After: 40 * time.Second}, Failures: 0},
			decision{Act: actDefer, Wait: 40 * time.Second, Reason: (&otapush.DeferError{Throttled: true, After: 40 * time.Second}).Error(), ReportSlot: true}, false},
		{"the push ran out of its time (its lease's deadline), the call goes on: a failed push, counted and backed off",
			failure{Err: fmt.Errorf("network: %w", context.DeadlineExceeded), Failures: 1},
			decision{Act: actDefer, Wait: 4 * time.Second, Reason: "push deferred for 0s: no answer within the push's time: network: context deadline exceeded",
				CountFailure: true, ReportSlot: true}, false},
		{"the push ran out of its time past MaxFailures: give up with the reason", failure{Err: context.DeadlineExceeded, Failures: 8},
			decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: "gave up after 9 failed pushes in a row: push deferred for 0s: no answer within the push's time: context deadline exceeded"}, false},
		{"the call ended (the invocation's deadline): the caller returns it", failure{Err: context.DeadlineExceeded, CallEnded: true}, decision{}, true},
		{"the call ended during a vendor's failure: the caller returns it", failure{Err: &otapush.DeferError{}, CallEnded: true}, decision{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.Policy = p
			got, ok := decideFailure(tt.f)
			if ok == tt.notVendor || got != tt.want {
				t.Fatalf("decideFailure = %+v, %v; want %+v, %v", got, ok, tt.want, !tt.notVendor)
			}
		})
	}
}

// TestDecideBegin covers what becomes of a job whose work handed back no
// push: a duplicate or an idle lane coalesces, a malformed one is
// dead-lettered, one that must look again later is deferred until then.
func TestDecideBegin(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	recheck := &RecheckError{At: t0.Add(40 * time.Second), Reason: "owned by another worker"}
	malformed := fmt.Errorf("%w: lane payload", job.ErrMalformed)
	tests := []struct {
		name string
		err  error
		held bool
		want decision
		ok   bool
	}{
		{"a duplicate: coalesced, its slot not wasted (the other copy's)", ErrNothingToPush, true, decision{Act: actCoalesce, Reason: ErrNothingToPush.Error()}, true},
		{"nothing pending: coalesced, its slot wasted", ErrIdle, true, decision{Act: actCoalesce, Reason: ErrIdle.Error(), Wasted: true}, true},
		{"nothing pending, no slot", ErrIdle, false, decision{Act: actCoalesce, Reason: ErrIdle.Error()}, true},
		{"malformed: dead-lettered", malformed, true, decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: malformed.Error()}, true},
		{"recheck: deferred until then", recheck, true, decision{Act: actDefer, Wait: 40 * time.Second, Reason: recheck.Error(), Wasted: true}, true},
		{"the work's store failed: the caller fails closed", errors.New("throttled"), true, decision{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := decideBegin(tt.err, tt.held, t0)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("decideBegin = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestDecideRefusal covers what becomes of a job the limiter gave no slot.
func TestDecideRefusal(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	booked := &limiter.ExhaustedError{RetryAfter: 3 * time.Minute}
	down := fmt.Errorf("reserve: %w", limiter.ErrUnavailable)
	invalid := &limiter.ArgumentError{Field: "route.sharded", Reason: "no shards"}
	base := refusal{Deadline: t0.Add(time.Minute), MaxAge: 24 * time.Hour, End: t0.Add(time.Minute), Cooldown: 10 * time.Second}
	tests := []struct {
		name string
		edit func(*refusal)
		want decision
		ok   bool
	}{
		{"no slot before its deadline: shed, no token spent", func(r *refusal) { r.Err, r.Bound = booked, deadlineBound },
			decision{Act: actDeadLetter, Outcome: Shed, Reason: "no slot before the deadline 2026-12-01T12:01:00Z; no token spent"}, true},
		{"no slot before its max age ends: expired, no token spent", func(r *refusal) { r.Err, r.Bound = booked, maxAgeBound },
			decision{Act: actDeadLetter, Outcome: Expired, Reason: "expired: no slot before its max_age 24h0m0s ends at 2026-12-01T12:01:00Z; no token spent"}, true},
		{"booked beyond the horizon: back when it is not", func(r *refusal) { r.Err = booked },
			decision{Act: actDefer, Wait: 3 * time.Minute, Reason: "bucket booked beyond the booking horizon"}, true},
		{"a horizon's denial within the call's hold: sleep to the next token, spread, and ask again", func(r *refusal) {
			r.Err, r.Bound, r.Horizon, r.Spread = &limiter.ExhaustedError{RetryAfter: 200 * time.Millisecond}, noBound, true, 30*time.Millisecond
			r.Now, r.Sleep = t0, sleepBound{Hold: t0.Add(500 * time.Millisecond)}
		}, decision{Act: actSleep, Wait: 230 * time.Millisecond, Reason: "a horizon's next token"}, true},
		{"a horizon's denial past the call's hold: deferred", func(r *refusal) {
			r.Err, r.Bound, r.Horizon = &limiter.ExhaustedError{RetryAfter: 2 * time.Second}, noBound, true
			r.Now, r.Sleep = t0, sleepBound{Hold: t0.Add(500 * time.Millisecond)}
		}, decision{Act: actDefer, Wait: 2 * time.Second, Reason: "bucket booked beyond the booking horizon"}, true},
		{"a horizon's denial bounded by the deadline: shed, not slept", func(r *refusal) {
			r.Err, r.Bound, r.Horizon = &limiter.ExhaustedError{RetryAfter: 200 * time.Millisecond}, deadlineBound, true
			r.Now, r.Sleep = t0, sleepBound{Hold: t0.Add(500 * time.Millisecond)}
		}, decision{Act: actDeadLetter, Outcome: Shed, Reason: "no slot before the deadline 2026-12-01T12:01:00Z; no token spent"}, true},
		{"contended: back at once", func(r *refusal) { r.Err = limiter.ErrContended }, decision{Act: actDefer, Reason: "bucket contended; retrying"}, true},
		{"an invalid limit: dead-lettered", func(r *refusal) { r.Err = invalid },
			decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: "route has an invalid limit: " + invalid.Error()}, true},
		{"the call ended: the caller returns it", func(r *refusal) { r.Err, r.CtxErr = down, context.Canceled }, decision{}, false},
		{"store down, a local share: push within it", func(r *refusal) { r.Err, r.LocalShare = down, true }, decision{Act: actLocalShare, StoreError: true}, true},
		{"store down: back after the cooldown (fail closed)", func(r *refusal) { r.Err = down },
			decision{Act: actDefer, Wait: 10 * time.Second, Reason: "limiter store unavailable", StoreError: true}, true},
		{"store calls paused by the breaker: back when it closes", func(r *refusal) { r.Err = &breaker.OpenError{RetryAfter: 30 * time.Second} },
			decision{Act: actDefer, Wait: 30 * time.Second, Reason: "limiter store unavailable", StoreError: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base
			tt.edit(&r)
			got, ok := decideRefusal(r)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("decideRefusal = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestDecideQuota covers what becomes of a job whose take of its route's
// quota (with its token, or alone for a slot held) was refused.
func TestDecideQuota(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	next := &limiter.ExhaustedError{RetryAfter: 200 * time.Millisecond}
	reset := &limiter.ExhaustedError{Key: "quota#q", RetryAfter: 3 * time.Hour}
	down := fmt.Errorf("take: %w", limiter.ErrUnavailable)
	invalid := &limiter.ArgumentError{Field: "route.quota", Reason: "count 0"}
	q := limiter.QuotaBucket{Key: "q", Quota: gcra.Quota{Count: 1000, Period: gcra.Day}}
	base := quotaRefusal{Quota: q, Now: t0, Sleep: sleepBound{Hold: t0.Add(500 * time.Millisecond)},
		FirstSeen: t0.Add(-time.Minute), MaxAge: 24 * time.Hour, Cooldown: 10 * time.Second}
	tests := []struct {
		name string
		edit func(*quotaRefusal)
		want decision
	}{
		{"the route's next token near, within the call's hold: sleep for it and ask again", func(r *quotaRefusal) { r.Err = next },
			decision{Act: actSleep, Wait: 200 * time.Millisecond, Reason: "the quota route's next token"}},
		{"the next token past the call's hold: deferred to it", func(r *quotaRefusal) { r.Err, r.Sleep.Hold = next, t0.Add(100*time.Millisecond) },
			decision{Act: actDefer, Wait: 200 * time.Millisecond, Reason: "no token of the quota route's limits now"}},
		{"the next token into the invocation's deadline margin: deferred", func(r *quotaRefusal) {
			r.Err, r.Sleep.Deadline, r.Sleep.Margin = next, t0.Add(time.Second), time.Second
		}, decision{Act: actDefer, Wait: 200 * time.Millisecond, Reason: "no token of the quota route's limits now"}},
		{"the next token for a slot held: its unit is refused, not slept for", func(r *quotaRefusal) { r.Err, r.Held = next, true },
			decision{Act: actDefer, Wait: 200 * time.Millisecond, Reason: "no token of the quota route's limits now"}},
		{"the next token at the deadline: shed, nothing spent", func(r *quotaRefusal) { r.Err, r.Deadline = next, t0.Add(200*time.Millisecond) },
			decision{Act: actDeadLetter, Outcome: Shed, Reason: "no slot before the deadline 2026-12-01T12:00:00Z; no token spent"}},
		{"the next token past the max age: expired, nothing spent", func(r *quotaRefusal) { r.Err, r.MaxAge = next, time.Minute+100*time.Millisecond },
			decision{Act: actDeadLetter, Outcome: Expired, Reason: "expired: no slot before its max_age 1m0.1s ends at 2026-12-01T12:00:00Z; no token spent"}},
		{"quota spent: back after its reset, never slept for", func(r *quotaRefusal) { r.Err, r.Spent, r.Sleep = reset, true, sleepBound{} },
			decision{Act: actDefer, Wait: 3 * time.Hour, Reason: "quota of 1000 per day spent: back after its reset, spread over the minute after it"}},
		{"quota spent, its reset past the deadline: shed", func(r *quotaRefusal) { r.Err, r.Spent, r.Deadline = reset, true, t0.Add(time.Hour) },
			decision{Act: actDeadLetter, Outcome: Shed, Reason: "no slot before the deadline 2026-12-01T13:00:00Z; no token spent"}},
		{"quota spent, its reset past the max age: expired", func(r *quotaRefusal) { r.Err, r.Spent, r.MaxAge = reset, true, time.Hour },
			decision{Act: actDeadLetter, Outcome: Expired, Reason: "expired: no slot before its max_age 1h0m0s ends at 2026-12-01T12:59:00Z; no token spent"}},
		{"contended: back at once", func(r *quotaRefusal) { r.Err = limiter.ErrContended }, decision{Act: actDefer, Reason: "bucket contended; retrying"}},
		{"an invalid quota: dead-lettered", func(r *quotaRefusal) { r.Err = invalid },
			decision{Act: actDeadLetter, Outcome: DeadLettered, Reason: "route has an invalid limit or quota: " + invalid.Error()}},
		{"store down: back after the cooldown (fail closed)", func(r *quotaRefusal) { r.Err = down },
			decision{Act: actDefer, Wait: 10 * time.Second, Reason: "limiter store unavailable", StoreError: true}},
		{"store calls paused by the breaker: back when it closes", func(r *quotaRefusal) { r.Err = &breaker.OpenError{RetryAfter: 30 * time.Second} },
			decision{Act: actDefer, Wait: 30 * time.Second, Reason: "limiter store unavailable", StoreError: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base
			tt.edit(&r)
			if got := decideQuota(r); got != tt.want {
				t.Fatalf("decideQuota = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestDecidePlans covers the steps a plan takes after its first: how far
// decide plans ahead, where it leaves the rest to decideSlot or to being
// asked again, and until when its plan holds.
func TestDecidePlans(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	base := func() situation {
		return situation{
			Job:    job.Job{ID: "j", FirstSeen: t0.Add(-time.Minute)},
			Now:    t0,
			MaxAge: time.Hour, Grace: 2 * time.Second, Early: 100 * time.Millisecond,
			Lead: leadRule{Floor: time.Second, Ratio: 0.1},
		}
	}
	acts := func(p plan) []action {
		var out []action
		for _, d := range p.Steps {
			out = append(out, d.Act)
		}
		return out
	}
	tests := []struct {
		name     string
		edit     func(*situation)
		want     []action
		slot     bool
		until    time.Time
		crowdedA bool // the lease-first step waits for crowding (IfCrowded)
	}{
		{"no hold: book, then the slot", func(*situation) {}, []action{actReserve}, true, t0.Add(59 * time.Minute), false},
		{"work to begin: begin it, then book", func(s *situation) { s.Prepares = true },
			[]action{actPrepare, actReserve}, true, t0.Add(59 * time.Minute), false},
		{"deadline sooner than the max age: the plan holds until it", func(s *situation) {
			s.Prepares, s.Job.Deadline = true, t0.Add(time.Minute)
		}, []action{actPrepare, actReserve}, true, t0.Add(time.Minute), false},
		{"handed back: the plan holds until the call's hold ends", func(s *situation) {
			s.Next, s.Sleep.Hold = true, t0.Add(time.Second)
		}, []action{actReserve}, true, t0.Add(time.Second + time.Nanosecond), false},
		{"handed back: ... or the invocation's margin begins", func(s *situation) {
			s.Next, s.Sleep.Deadline, s.Sleep.Margin = true, t0.Add(5*time.Second), 3*time.Second
		}, []action{actReserve}, true, t0.Add(2 * time.Second), false},
		{"leases: join, the lease first if crowded then, book", func(s *situation) { s.Lease.Gated, s.Prepares = true, true },
			[]action{actPrepare, actJoinLease, actLeaseFirst, actReserve}, true, t0.Add(59 * time.Minute), true},
		{"leases joined, the set free: book", func(s *situation) { s.Lease = leaseState{Gated: true, Joined: true} },
			[]action{actReserve}, true, t0.Add(59 * time.Minute), false},
		{"leases joined, the set crowded: the lease first, then book", func(s *situation) {
			s.Lease = leaseState{Gated: true, Joined: true, Crowded: true}
		}, []action{actLeaseFirst, actReserve}, true, t0.Add(59 * time.Minute), false},
		{"hold expired, a recheck due once it is dropped: begin, then ask again", func(s *situation) {
			s.Job.Hold, s.Prepares, s.Rechecks = job.Hold{At: t0.Add(-3 * time.Second)}, true, true
		}, []action{actPrepare, actRecheck}, false, t0.Add(59 * time.Minute), false},
		{"slot carried in, work to begin: begin it ahead, then the slot again", func(s *situation) {
			s.Job.Hold, s.Prepares, s.PrepLead = job.Hold{At: t0.Add(800 * time.Millisecond)}, true, 300*time.Millisecond
		}, []action{actPrepare}, true, t0.Add(59 * time.Minute), false},
		{"slot booked in the call: no checks before it, nothing bounds the plan", func(s *situation) {
			s.Job.Hold, s.Booked = job.Hold{At: t0.Add(800 * time.Millisecond)}, true
		}, []action{actPush}, false, time.Time{}, false},
		{"not due: sleep, then ask again", func(s *situation) { s.Job.NotBefore, s.Prepares = t0.Add(500*time.Millisecond), true },
			[]action{actSleep}, false, t0.Add(59 * time.Minute), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.edit(&s)
			p := decide(s)
			if got := acts(p); fmt.Sprint(got) != fmt.Sprint(tt.want) || p.Slot != tt.slot || !p.Until.Equal(tt.until) {
				t.Fatalf("decide = %v slot=%v until %v, want %v slot=%v until %v", got, p.Slot, p.Until, tt.want, tt.slot, tt.until)
			}
			for _, d := range p.Steps {
				if d.Act == actLeaseFirst && d.IfCrowded != tt.crowdedA {
					t.Errorf("lease first IfCrowded=%v, want %v", d.IfCrowded, tt.crowdedA)
				}
			}
			if !p.holds(s.Now, s.StoreFailing) || p.holds(s.Now, !s.StoreFailing) {
				t.Errorf("the plan does not hold where it was made, or holds with the store's health turned")
			}
		})
	}
}
