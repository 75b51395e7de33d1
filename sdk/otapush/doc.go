// Package otapush sends one push to an OTA endpoint the way a well-behaved
// fleet member must: it pays the shared bucket before every request, retries
// included; a throttle (429, or the statuses Signals name) empties the bucket
// for the whole fleet until the vendor's Retry-After; transient failures retry
// within a bounded budget and then hand the job back for deferral (a
// *DeferError); any other 4xx is permanent (a *PermanentError).
//
// Begin with New(httpClient, lim, policy), lim a *limiter.Limiter (or anything
// that satisfies Limiter), and call Client.Push for each request. New(nil, …)
// uses an http.Client with a timeout, never http.DefaultClient.
//
// Push (client.go) sends each attempt; acquire.go takes an attempt's token
// where the request holds none (a retry, a later message of a push);
// answer.go reads a throttle's wait (retryafter.go, ratelimit.go, the
// vendor's Signals in signals.go) and penalizes the bucket for the fleet.
package otapush
