// Package syncer is what the sync function does with each message.
//
// A PMS change is written into ARI state (sdk/pipeline/ari) and marks the
// lanes it fans out to dirty (sdk/pipeline/lane): one lane per connection of
// the property and kind. A lane with no push scheduled gets exactly one: a
// job that reserves a slot and then pushes or is deferred
// (sdk/pipeline/dispatch). At its slot, the job pushes the current state of
// everything pending in the lane, up to the endpoint's max_items and
// max_bytes, in the channel's message format (sdk/pipeline/format), clears
// what the vendor accepted, and, if more arrived meanwhile, books the lane's
// next slot. A refused change is isolated from those merged with it and
// dead-lettered alone.
//
// Calls go one way: the syncer resolves each job once into a
// dispatch.Task (task.go: the job, its route, and the lane's work, which
// holds the lane read from the job's payload and the invocation the job
// came in) and hands a batch of them to the dispatcher (Dispatcher.Run),
// which asks the lane's work, and nothing else of the syncer, what it
// pushes (Begin), settles it (Done), keeps it (Hold) or gives it up
// (Abandon).
//
// Begin with a Syncer (its fields are its dependencies: the config, the ARI
// and lane stores, a dispatcher) and give it each SQS batch (HandleBatch);
// functions/sync wires one from its environment.
package syncer
