// Package breaker is a consecutive-failure circuit breaker. The limiter uses
// it to stop calling an unreachable DynamoDB: every call that would time out
// anyway costs the caller latency and the store a retry storm when it comes
// back, and the answer (no grant, defer the work) is the same.
//
// Begin with New(threshold, cooldown); call Allow before each call and
// Record after it. Time is a parameter, so tests need no sleep.
package breaker
