package config

import (
	"fmt"
	"time"
)

// Bounds of an endpoint's max_age and max_deferrals. A job needs a slot
// and the queue's round trips to push at all, so a shorter max_age or a
// smaller max_deferrals would dead-letter healthy jobs; longer or larger
// ones would let a job that cannot push draw on the bucket for weeks.
const (
	MinMaxAge       = time.Minute
	MaxMaxAge       = 14 * 24 * time.Hour
	MinMaxDeferrals = 5
	MaxMaxDeferrals = 100_000
)

// Lifetime returns the endpoint's max_age and max_deferrals, zero where the
// file leaves them out (the dispatcher's defaults apply: see
// dispatch.DefaultPolicy). It assumes a validated endpoint.
func (e Endpoint) Lifetime() (maxAge time.Duration, maxDeferrals int) {
	if e.MaxAge != "" {
		maxAge, _ = time.ParseDuration(e.MaxAge)
	}
	if e.MaxDeferrals != nil {
		maxDeferrals = *e.MaxDeferrals
	}
	return maxAge, maxDeferrals
}

// validateLifetime checks max_age and max_deferrals, each error naming its
// place (at is the endpoint's path in the file).
func validateLifetime(at string, e Endpoint) []error {
	var errs []error
	if e.MaxAge != "" {
		d, err := time.ParseDuration(e.MaxAge)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s.max_age: %q is not a duration, want e.g. \"24h\" or \"90m\"", at, e.MaxAge))
		case d < MinMaxAge || d > MaxMaxAge:
			errs = append(errs, fmt.Errorf("%s.max_age: %s, want %s to %s", at, e.MaxAge, MinMaxAge, MaxMaxAge))
		}
	}
	if n := e.MaxDeferrals; n != nil && (*n < MinMaxDeferrals || *n > MaxMaxDeferrals) {
		errs = append(errs, fmt.Errorf("%s.max_deferrals: %d, want %d (a healthy job is deferred a few times: its linger, its slot, an early return) to %d", at, *n, MinMaxDeferrals, MaxMaxDeferrals))
	}
	return errs
}
