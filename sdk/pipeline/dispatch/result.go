package dispatch

import (
	"time"
)

// Outcome is what became of a job.
type Outcome string

const (
	Pushed       Outcome = "pushed"
	Deferred     Outcome = "deferred"
	Shed         Outcome = "shed"          // deadline: dead-lettered, no token spent
	DeadLettered Outcome = "dead-lettered" // malformed, unroutable, or refused by the vendor
	// Expired: past its max age or max deferrals, dead-lettered with a
	// reason that starts "expired: ".
	Expired Outcome = "expired"
	// Coalesced: the job had nothing to send: a duplicate delivery, or
	// work that another job carries (Work.Begin said ErrNothingToPush).
	Coalesced Outcome = "coalesced"
)

// Result describes one handled job. Whatever the outcome, the message it
// came in is done with and may be deleted.
type Result struct {
	JobID string
	// Bucket is the key of the bucket the job draws from.
	Bucket string
	// Channel is the OTA the job pushes to.
	Channel string
	Outcome Outcome
	Reason  string
	// Wait is the deferral's delay.
	Wait time.Duration
	// Slot is the slot the job held when pushed or deferred.
	Slot time.Time
	// Attempts is the number of requests the push sent, and Throttled how
	// many of them the vendor answered 429.
	Attempts, Throttled int
	// StoreError is set when the limiter store failed on the way.
	StoreError bool
	// WastedSlots counts slots this job held and left unused: expired
	// before it ran, or held by a job then shed or dead-lettered. They
	// waste quota but never overspend it.
	WastedSlots int
	// RevokedSlots counts slots granted this job ahead that a throttle
	// since revoked before they came: an adaptive bucket's slot a lower
	// rate revoked (Confirm), the job booking again at the rate that
	// holds, or any slot lying inside the silence a 429 asked (Silence),
	// the job coming back at its end. The quota they stood for went
	// unused; none was overspent.
	RevokedSlots int
	// Pushes counts the requests the vendor accepted while handling the
	// job: a lane with more pending may push again in the same call.
	Pushes int
	// Items counts what those pushes carried (Payload.Items).
	Items int
	// Lateness is how long after its due time a deferred job was
	// delivered (negative: early); zero for a job not deferred.
	Lateness time.Duration
	// Delayed is the delay that deferral asked for.
	Delayed time.Duration
	// ShadowWouldDefer and ShadowWouldShed say what enforcement would have
	// done with a push of a Shadow route that went out at once: defer it
	// (its slot lay beyond blocking distance, or no slot within
	// MaxReserve) or shed it (no slot before its deadline). ShadowWait is
	// how long it would have waited for its slot (the longest, over the
	// jobs of one call).
	ShadowWouldDefer, ShadowWouldShed bool
	ShadowWait                        time.Duration
	// LocalShares counts pushes paced by the local share while the store
	// was unreachable.
	LocalShares int
	// CredentialRefused: the vendor refused the route's credential (401,
	// 403) and no new token replaced it; the route's bucket is paused and
	// the job kept (or, past MaxFailures, dead-lettered with its work
	// kept pending). An operator must fix the credential.
	CredentialRefused bool
	// HotelRefused: the vendor refused the hotel or its connection (an
	// unknown or deactivated hotel id, a property no longer connected),
	// not any change the push carried. Nothing was taken apart or
	// dead-lettered: the job waits out a backoff holding the lane, which
	// keeps every change (past MaxFailures the job is dead-lettered and
	// the lane, still pending, left to the sweep). An operator must fix
	// the hotel's connection.
	HotelRefused bool
	// Warnings counts the warnings vendors sent with accepted requests
	// (Message.Judge), Refused the changes the vendor refused and that
	// were dead-lettered alone, and Isolation the extra requests spent
	// taking refused messages apart to find them (Isolate).
	Warnings, Refused, Isolation int
}

// then is r followed by next: next's outcome, both counters.
func (r Result) then(next Result) Result {
	next.Attempts += r.Attempts
	next.Throttled += r.Throttled
	next.WastedSlots += r.WastedSlots
	next.RevokedSlots += r.RevokedSlots
	next.Pushes += r.Pushes
	next.Items += r.Items
	next.StoreError = next.StoreError || r.StoreError
	next.ShadowWouldDefer = next.ShadowWouldDefer || r.ShadowWouldDefer
	next.ShadowWouldShed = next.ShadowWouldShed || r.ShadowWouldShed
	next.ShadowWait = max(next.ShadowWait, r.ShadowWait)
	next.LocalShares += r.LocalShares
	next.CredentialRefused = next.CredentialRefused || r.CredentialRefused
	next.HotelRefused = next.HotelRefused || r.HotelRefused
	next.Warnings += r.Warnings
	next.Refused += r.Refused
	next.Isolation += r.Isolation
	next.Lateness, next.Delayed = r.Lateness, r.Delayed
	if next.JobID == "" {
		next.JobID = r.JobID
	}
	return next
}
