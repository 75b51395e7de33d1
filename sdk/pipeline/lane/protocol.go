// How lanes work: the protocol behind package lane (introduced in doc.go),
// kept apart from the code in lane.go.
//
// A lane is one stream of pushes: a property's changes of one kind
// (availability, rates, restrictions) to one connection of it (channel,
// credential, hotel_ref). A change marks its lanes dirty with one element
// each (the cell, date range and sequence it wrote). The first change to
// find a lane without an owner becomes its owner and schedules one push;
// the others only add their elements. At its slot the owner claims the
// lane, which also reads it, pushes the current state of the pending
// elements, and then either finishes the lane (clears what it pushed and
// releases it, in one write, if nothing else is pending) or schedules its
// next push, whose claim clears what this one pushed. Whatever arrived
// meanwhile stays. So a lane's requests follow the bucket's slot rate, not
// the change rate; every push carries all that is pending; and a lane
// under steady load costs one lane write per push.
//
// Elements are unique per change (they carry its sequence), so clearing
// what was pushed can never drop a change that arrived during the push.
//
// # Ownership and leases
//
// The owner is a token. A claim moves it from the token a job carries to a
// fresh one, conditional on the carried token, so a job delivered twice
// pushes once: the second copy finds another owner. A claim that failed
// without an answer may have landed, leaving the lane to the fresh token
// it offered; the job keeps that token and claims from either next time
// (ClaimAfter), still moving the lane to a fresh one. Every owner holds a
// lease; an owner that dies (a crashed worker) loses the lane when its
// lease runs out, and the next change or a redelivered job takes over.
// Owners renew the lease on every write and before every deferral.
//
// # Pushing without a claim
//
// At a fleet's load nearly every push is the first of a lane that its own
// change just marked, and its claim would only move the owner from one
// token of that invocation to another and read back what the mark's
// answer (ALL_NEW) already said. So a mark's token is unique to the
// delivery (not derived from the change), and a mark that made it the
// owner of a lane with no owner, neither stranded nor compacted
// (Mark.Fresh), lets that invocation push the lane at once with no claim:
// no other delivery holds the token, so a second delivery of the same
// change finds the lane owned and pushes nothing itself (the syncer
// schedules a recheck, which takes the lane over if the first delivery
// died holding it), and no other push of the lane can start while the
// lease lasts. Every other push claims as above: a job that left the invocation
// (deferred, redriven), a lane's next push, a takeover. Finish still
// checks the owner, so a push that outlived its lease clears nothing.
//
// The price is a crash's: a delivery that dies after marking holds its
// lanes until the lease runs out (DefaultLease), where a token derived
// from the change let the redelivery take them up at once. The next
// change, or the redelivery's recheck, takes them over then. The queue's
// visibility timeout comes before the redelivery anyway; a change that
// the worker sent again itself (syncer.Retry, seconds later) waits for
// the lease.
//
// The lanes of one item pushed in one invocation also finish together
// (FinishAll): one write clears and releases them all, on every lane's
// condition; if one fails, each finishes on its own.
//
// # Layout
//
// All lanes of one property and kind share one item in the ARI state table
// (pk = property#kind, sk = "lanes"), so one write marks every connection
// a change fans out to (one per marksPerWrite connections: DynamoDB
// bounds an expression's length and operators). Per lane, keyed by channel#credential#hotel_ref:
//
//	d:<lane> (SS) pending elements, room#rate plan#from#to#sequence
//	o:<lane> (S)  the owner's token
//	l:<lane> (N)  the owner's lease, Unix µs
//	w:<lane> (N)  set while the lane may be stranded (see Sweeping)
//	f:<lane> (N)  how many times in a row its jobs' pushes failed at the
//	              vendor (refused, given up); expired and shed jobs,
//	              which sent nothing, do not count
//	v:<lane> (N)  how many writes added to d (Mark, Compact)
//	x:<lane> (BOOL) a Compact replaced d since the owner's last claim
//
// # Sweeping
//
// A lane whose job ends without delivering (expired, shed, dead-lettered,
// a push given up) keeps its pending elements, and its owner ends the
// lease (EndLease). Nothing else would come back for those elements until
// the lane's next change, which a quiet hotel may never send. So EndLease
// also records when the lane was stranded (w:<lane>) and lists the item in
// a sparse global secondary index (SweepIndex) through attributes an item
// carries only while one of its lanes may be stranded:
//
//	sweep    (S) SweepPartition, the index's partition key
//	sweep_at (N) when the sweep should look at the item next, Unix µs
//	sweep_n  (N) a count of strandings: the sweep takes the item out of
//	             the index only if no lane was stranded since it read it
//
// Strand lists a lane the same way whoever owns it, leaving the lease: a
// job on its queue's last receive whose lane an earlier receive's claim
// holds, that invocation dead (syncer's receives.go); the sweep takes the
// lane once that lease is over.
//
// A deferred job's invocations may all die before any of them writes (a
// death 50 ms in beside a store answering in 278 ms, the last receive's
// hand-over included), and SQS's redrive then takes its message with no
// reason. So the writes that give a deferred job's lane its lease list
// the item for that lease's end too (Renew, ClaimAfter: listing), with
// sweep_at = if_not_exists(sweep_at, lease end) (a write cannot take the
// earlier of two times; the sweep relists for the earliest it finds) and
// sweep_n counted: a lane with something pending whose owner's lease ran
// out is due, stranded or not, from that lease's end. A Mark does not
// list (a fresh lane pushed in the marking invocation is the change's,
// whose message comes back if it dies); the syncer renews a Mark's lease
// before the job's first deferral (Hold), which lists it.
//
// The sweep (Due, then Sweep per item) takes each stranded lane over with
// a fresh owner, as a change would, and the caller schedules its push. A
// lane whose pushes the vendor keeps refusing or failing is due later each
// time (SweepBackoff), so it costs a push per backoff, not per sweep. A
// lane whose jobs end with nothing sent (expired or shed behind a backlog
// or an outage) costs the vendor nothing, and is due at once each time.
// The claim of the next push removes w:<lane>; a push that gets through
// removes f:<lane>.
//
// # A bounded item
//
// An item holds at most 400 KB, and a lane waiting for its slot (a bucket
// booked minutes ahead) gathers an element per change. So the pending
// elements are compacted once they pass a bound (Compact, Coalesce):
// elements of one cell merge into one per block of dates, carrying the
// newest sequence, so that a lane holds about cells × blocks elements
// whatever its backlog. A merged element covers every date of the
// elements it replaces (a push may carry a date again, never one less).
// Compact is the only writer besides the owner that removes elements, so
// it flags the lane (x) and Finish refuses while the flag is up: the
// owner's push may have read elements that the merge replaced, and its
// next claim clears nothing: a merged element may equal one the push
// carried (its block's, whose newest sequence a late change of an older
// one leaves as it was) and stand for dates the push never rendered, so a
// claim clearing done is refused while x is up and sent again without it
// (ClaimAfter).
// Compact applies only to the elements its mark read: the same owner,
// version and number of elements (a worker of the previous release,
// mid-deploy, adds elements without a version; docs/operations.md says
// how to roll out a release whose item forms change).
//
// The owner itself merges a lane of an endpoint metered by items right
// after its claim (MergeClaimed, Merge: runs of the dates the elements
// share, none added), on Compact's conditions but with no flag: it is the
// owner, and its push has read nothing yet.

package lane
