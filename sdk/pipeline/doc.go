// Package pipeline is the channel-manager application built on the fleet
// limiter (sdk/limiter): PMS change events become ARI state and lanes, and
// each lane's pending changes become pushes to an OTA within the OTA's
// quota. New builds one worker's pipeline from the channel config and its
// AWS clients: a syncer that hands each job, resolved once into a task
// (its route and its lane's work), to a dispatcher that hands back a
// result; the dispatcher holds nothing of the syncer.
//
// A lane job's path, and the file that decides each step (functions/sync
// is the Lambda handler that calls it):
//
//   - syncer/syncer.go (HandleBatch) takes a batch from the changes or the
//     deferred queue; a change is written into ARI state (ari/state.go)
//     and marks its lanes (syncer/mark.go, lane/lane.go's Mark), and a lane
//     the mark found idle gets one push job (syncer/laneref.go: its
//     payload names the lane and its owner token), due after the lane's
//     linger (syncer/mark.go's lingerOf: a second by default) and
//     resolved into its task (syncer/task.go, syncer/route.go);
//   - dispatch/batch.go (Run) books a batch's slots, one write a bucket;
//     per job, dispatch/serve.go carries out the plan dispatch/decide.go
//     makes (dispatch/decide_slot.go once a slot is held,
//     dispatch/decide_refused.go when none is): push at the slot, or defer;
//   - deferred (dispatch/defer.go, queue/queue.go), the job comes back on
//     the deferred queue carrying its slot, its lane's lease renewed to
//     cover the wait (syncer/hold.go). A lingering job takes this way
//     unless it books an early slot (dispatch/linger.go, when its bucket
//     would fill up before the linger ends): a change batch keeps its jobs
//     in process only syncer.ChangesHold, shorter than the default linger,
//     so its push goes out from the invocation the deferred queue hands
//     it to;
//   - ahead of its slot, so that only the send waits for it
//     (dispatch/prep.go), the push begins (syncer/lanes.go's Begin): it
//     claims the lane (syncer/claim.go, lane/lane.go's ClaimAfter) unless
//     its own invocation's mark took it, and renders everything pending
//     as one push in the channel's format (syncer/render.go, format); the
//     dispatcher sends it at the slot (dispatch/push.go,
//     dispatch/messages.go) through sdk/otapush;
//   - after the push, syncer/lanes.go's Done finishes the lane
//     (lane/finish.go) or hands back its next job; a push that failed
//     (dispatch/failure.go, decide_refused.go's decideFailure) is deferred
//     with a backoff, its lane held, until it is refused for good or
//     given up;
//   - a job that will never push is dead-lettered with its reason
//     (dispatch/defer.go, queue/queue.go), its lane given up with every
//     change still pending (syncer/abandon.go), and syncer/sweep.go, run
//     on a schedule, takes such lanes over (lane/sweep.go).
//
// docs/design.md in the repository draws this path (its opening diagram)
// and follows it call by call ("Calls go one way: a lane job's path").
//
// "Hold" names three things on the path: a job's hold on its slot
// (job.Hold, which it carries through the queue), a call's hold on its
// jobs (how long Run and Do keep one in process: dispatch.Policy.MaxHold,
// or syncer.ChangesHold for a change batch's), and a job's hold on its
// lane (dispatch.Work's Hold: the lane's lease renewed through a
// deferral).
//
// Its subpackages, in the order a change meets them:
//
//   - config: the channel connections file, validated at start-up
//   - connections: the connections as data, in a DynamoDB table
//   - ari: change events and the sequence-guarded ARI state
//   - lane: what each lane has pending and who pushes it
//   - job: a push job and its wire form on the deferred queue
//   - syncer: what the sync function does with each message
//   - format: each OTA's own message (json, opentravel, expedia-ar), how
//     its answer reads, and isolating a refused change
//   - dispatch: per job, push now, sleep, defer, shed or dead-letter
//   - queue: deferring a job onto SQS, dead-lettering with a reason
//   - credentials: OTA API credentials from Secrets Manager
//   - resync: a property's stored state pushed again, below live changes
//   - parity: reading back what an OTA holds, and repairing what drifted
package pipeline
