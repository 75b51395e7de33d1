// Package pipeline is the channel-manager application built on the fleet
// limiter (sdk/limiter): PMS change events become ARI state and lanes, and
// each lane's pending changes become pushes to an OTA within the OTA's
// quota. New builds one worker's pipeline from the channel config and its
// AWS clients: a syncer that hands each job, resolved once into a task
// (its route and its lane's work), to a dispatcher that hands back a
// result; the dispatcher holds nothing of the syncer. Its subpackages, in
// the order a change meets them:
//
//   - config: the channel connections file, validated at start-up
//   - ari: change events and the sequence-guarded ARI state
//   - lane: what each lane has pending and who pushes it
//   - job: a push job and its wire form on the deferred queue
//   - syncer: what the sync function does with each message
//   - format: each OTA's own message (json, opentravel, expedia-ar), how
//     its answer reads, and isolating a refused change
//   - dispatch: per job, push now, sleep, defer, shed or dead-letter
//   - queue: deferring a job onto SQS, dead-lettering with a reason
//   - credentials: OTA API credentials from Secrets Manager
//
// The design is docs/design.md in the repository.
package pipeline
