// Package gcra is the arithmetic of a fleet-wide token bucket, with no I/O:
// what sdk/limiter stores in DynamoDB, decided here as pure functions.
//
// A bucket of rate r tokens/s and burst b is one number, its theoretical
// arrival time tat, in integer microseconds. Begin with Decide(tat, now, l, n,
// maxDelay): it says whether n tokens fit now (or in a slot at most maxDelay
// ahead) and returns the tat to store. Remaining and Fit read a bucket without
// changing it; Check validates a request before any write.
//
// Time is a parameter of every function, never read from a clock, so the
// math is testable without sleeping. The model and its bounds are in
// docs/design.md ("The bucket").
package gcra
