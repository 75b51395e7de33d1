// Package fallback paces one process's pushes while the fleet's shared
// bucket cannot be reached: each process takes an equal share of every
// limit, so that the fleet as a whole still stays within it.
//
// Begin with New(N), N the most processes that can run at once (the
// function's maximum concurrency), and ask the Pacer for a token with
// Reserve while limiter calls fail with limiter.ErrUnavailable. Call Drain
// whenever the shared bucket grants a slot again, and book Pending with the
// first reservation after an outage, so the shared bucket pays back what was
// pushed locally.
package fallback
