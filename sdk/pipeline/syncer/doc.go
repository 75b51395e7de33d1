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
// Where a message goes, file by file. HandleBatch (syncer.go) takes a
// batch: a change is read, its property's connections found
// (connections.go) and written into ARI state, and its lanes are marked
// (mark.go, under tokens from owners.go); each lane the mark found idle
// gets one push job (laneref.go) resolved into its task (task.go, its
// route from route.go), and a job back from the deferred queue is
// resolved the same way. Of a task's work the dispatcher asks: Begin
// (lanes.go), which claims the lane (claim.go) unless this invocation's
// mark took it fresh (invocation.go) and renders what is pending
// (render.go) into the channel's messages (messages.go, whose Refused
// takes a refused one apart; apart.go carries an isolation on to the
// lane's next push); Done (lanes.go), which finishes the lane or hands
// back its next job; Hold (hold.go), which keeps the lane's lease through
// a deferral; and Abandon (abandon.go), which gives up a dead-lettered
// job's lane, for Sweep (sweep.go) to take over on a schedule. Retry
// (retry.go) sends a failed change again; Resync (resync.go, bulk.go)
// makes a property's lanes pending at the bulk class, below live changes.
//
// Begin with a Syncer (its fields are its dependencies: the config, the ARI
// and lane stores, a dispatcher) and give it each SQS batch (HandleBatch);
// functions/sync wires one from its environment.
package syncer
