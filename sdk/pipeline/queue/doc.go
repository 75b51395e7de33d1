// Package queue turns "no token yet" into a delayed SQS message, and "never"
// into a dead-letter message with its reason.
//
// A deferred job is sent back with DelaySeconds equal to the computed wait
// and, when it holds one, its reserved slot: SQS hands it back when its token
// is already its own, so it pushes with no second acquire. Waits past SQS's
// 15-minute ceiling chain: the job carries its due time and is deferred again
// for the remainder. No jitter is added: each deferred job owns a distinct
// slot, so redeliveries are already spread as the bucket allows.
//
// Begin with a Queue (an SQS client and the deferred and dead-letter queue
// URLs); call Defer and DeadLetter.
package queue
