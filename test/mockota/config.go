// Package mockota is a mock OTA (online travel agency) API that is as strict
// as a real vendor's: it meters requests per (credential, endpoint) with a
// token bucket, answers 429 with Retry-After, can enforce a stricter limit it
// does not publish, fails on demand, and records everything it answered.
//
// Integration tests, benchmarks and the local demo point fleetbucket's OTA
// client at it and then ask it what the vendor saw: whether the fleet ever
// exceeded the limit, and whether every job was accepted exactly once. Its
// bucket is the same GCRA arithmetic as the SDK's (sdk/gcra) on an
// injectable clock, so a test with a manual clock knows to the microsecond
// what the vendor will grant.
package mockota

import (
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// Config describes the vendor a Server imitates. Limit is required; every
// other zero value is a usable default.
type Config struct {
	// Limit is the published limit of each (credential, endpoint) bucket,
	// the one a well-configured fleet is told to stay under.
	Limit gcra.Limit
	// Limits overrides Limit per endpoint ("availability", "rates", …),
	// since vendors meter their endpoints differently.
	Limits map[string]gcra.Limit
	// HiddenLimit, when set, is a stricter limit the vendor enforces on each
	// (credential, endpoint) bucket without publishing it: the case where a
	// fleet configured to the documentation still earns 429s and must
	// learn from Retry-After.
	HiddenLimit *gcra.Limit

	// Credentials are the accepted bearer tokens. Empty accepts any
	// non-empty token, for tests that do not care about authentication.
	Credentials []string

	// Now is the vendor's clock, read once per request. Tests inject a
	// manual clock so that grants and Retry-After values are exact and
	// nothing sleeps. Default time.Now.
	Now func() time.Time
	// Latency delays every answer after the decision is made (and
	// recorded at arrival time), imitating a slow network or vendor.
	Latency time.Duration

	// RetryAfterHTTPDate sends Retry-After as an HTTP-date instead of
	// delay-seconds; both forms are legal and clients must parse both.
	RetryAfterHTTPDate bool
	// OmitRetryAfter sends 429s with no Retry-After, as some vendors do.
	OmitRetryAfter bool
	// OmitRateLimitHeaders drops X-RateLimit-Limit and
	// X-RateLimit-Remaining, for clients that must cope without them.
	OmitRateLimitHeaders bool

	// Port is the port to listen on at 127.0.0.1; 0 picks a free one,
	// which is what tests running in parallel need.
	Port int
}

// validate refuses a configuration that would make the mock lenient or
// crash: an invalid limit here would otherwise turn into a server that
// grants everything or divides by zero mid-test.
func (c Config) validate() error {
	if err := gcra.Check(c.Limit, 1, 0); err != nil {
		return fmt.Errorf("mockota: Limit: %w", err)
	}
	for ep, l := range c.Limits {
		if ep == "" {
			return errors.New("mockota: Limits: empty endpoint name")
		}
		if err := gcra.Check(l, 1, 0); err != nil {
			return fmt.Errorf("mockota: Limits[%q]: %w", ep, err)
		}
	}
	if c.HiddenLimit != nil {
		if err := gcra.Check(*c.HiddenLimit, 1, 0); err != nil {
			return fmt.Errorf("mockota: HiddenLimit: %w", err)
		}
	}
	for _, cred := range c.Credentials {
		if cred == "" {
			return errors.New("mockota: Credentials: empty credential")
		}
	}
	if c.Latency < 0 {
		return fmt.Errorf("mockota: Latency %v, want ≥ 0", c.Latency)
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("mockota: Port %d, want 0..65535", c.Port)
	}
	return nil
}

// limit is the published limit of endpoint.
func (c Config) limit(endpoint string) gcra.Limit {
	if l, ok := c.Limits[endpoint]; ok {
		return l
	}
	return c.Limit
}
