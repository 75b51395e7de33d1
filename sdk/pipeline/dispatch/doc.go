// Package dispatch decides, for each push job a worker receives, whether to
// push it now, defer it onto the queue, or shed it, and carries that out.
//
// The policy, in order (its thresholds are Policy's fields, policy.go;
// a route may set its own max age and max deferrals):
//   - unroutable or malformed: dead-letter with the reason, never retried;
//   - older than its route's max age (first seen + MaxAge), or about to
//     be deferred past its MaxDeferrals-th trip or its max age: expire it
//     to the dead-letter queue with the reason, so no job loops forever;
//   - deadline passed, or the earliest slot lands after it: shed to the
//     dead-letter queue with the reason, spending no token (the reservation
//     is bounded by the deadline, so it is refused rather than booked);
//   - not due yet (job.Job's NotBefore: a lane's linger, a recheck's
//     time, a chained wait past SQS's 15 minutes): sleep for it within the
//     call's hold, or defer the rest;
//   - a job that only comes back to see whether its work is its own
//     (Task.Recheck): ask the work first, and book a slot only once it is;
//   - holding a slot within grace: use it, with no second acquire;
//   - otherwise reserve a slot up to MaxReserve ahead (never past the
//     job's max age: with no slot before it, the job expires, spending no
//     token);
//   - slot within BlockThreshold (and the invocation's remaining time):
//     sleep until it and push; further away: defer the job, slot and all,
//     to come back early by the delivery lateness observed (LateRatio,
//     raised to what lateness.go sees);
//   - after a push of state-backed work (Work), the work may hand back its
//     next job (a lane with more pending): it is reserved and pushed or
//     deferred the same way, in the same call, until the call's hold
//     (MaxHold) ends; one handed back after it is deferred unbooked, on
//     every route;
//   - the limiter store unavailable: defer for StoreCooldown (fail closed);
//     the queue unavailable too: return an error, so the message stays on
//     its source queue and is redelivered. Nothing is lost. A route with
//     LocalShare instead pushes within this process's local share of the
//     limit (Dispatcher.LocalShare), and defers only when that share has
//     no token soon;
//   - a Shadow route reserves as above and records what enforcement would
//     have done (Result.ShadowWouldDefer, ShadowWouldShed, ShadowWait),
//     but pushes at once.
//
// A caller hands the dispatcher Tasks (task.go): a job, the route its
// caller resolved once, and the work it carries (Work; nil for a payload
// job, which pushes its own payload). Run handles a batch of them under
// one hold, Do one; each hands back Results. The dispatcher calls nothing
// of its caller but the task's Work, which is that job's own; a context
// carries only cancellation and deadlines.
//
// What to do with a job is decided by functions of values, with no I/O:
// decide.go's decide, the plan of a job's steps up to its slot;
// decide_slot.go's decideSlot, what a slot held asks; decide_refused.go's
// decideRefusal, decideQuota, decideBegin and decideFailure, for a refused
// booking, a quota route's refused take, a work with nothing to push and a
// failed push. Grace, revocation, the horizon's and a quota route's short
// waits, the lease before the token and shadow mode are decided there too.
//
// Where a job goes, and the file that does each step: Run (batch.go) books
// a batch's slots, one write a bucket, and hands each task to Do
// (dispatch.go), which hands it to serve (serve.go). serve carries out the
// plan and decides nothing itself: linger.go books a lingering job's early
// slot (job.Job's Linger: its bucket would fill up before the linger
// ends), reserve.go books a slot, lease.go takes a route's in-flight lease
// (before the token while its lease set is crowded; learncap.go learns the
// cap of a vendor that names it only in its 429s), work.go begins the
// task's work (ahead of its slot by what prep.go learns it takes) and
// settles it after the push, push.go and messages.go send the push's
// messages through the Pusher (sdk/otapush), failure.go handles a failed
// push, and defer.go defers the job onto the queue (its work held,
// Work.Hold) or dead-letters it (its work given up, Work.Abandon). A
// lane's next job, handed back by Work.Done, goes round serve again in the
// same call. The rest: quota.go takes a calendar quota's unit with the
// token, items.go charges endpoints metered by items, probe.go asks
// whether a slot booked earlier still stands (an adaptive bucket's stamp,
// a vendor's silence since), localshare.go pushes through a limiter store
// outage, askers.go books fleet-wide turns to ask for routes that take only
// tokens free at once; policy.go, capabilities.go, result.go and task.go hold the types,
// and holding.go what becomes of a job's slot (dropped or taken, wherever
// that is decided), the one place a job's Hold is written.
//
// State-backed work that a dead-lettered job carried is given up
// (Work.Abandon), so the next job to take it up finds it pending: that
// includes a push the vendor refused or that gave up after MaxFailures,
// whose work is never settled as if delivered. A credential the vendor
// refuses (401/403) with no new token to try pauses its bucket for the
// fleet, and the job waits with its work (Result.CredentialRefused).
package dispatch
