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
//
// A test that asserts the vendor-side invariant should not trust that
// arithmetic, which is the code under test: Config.Enforce can make the mock
// decide with its own sliding-window log instead (package window, which
// shares no code with sdk/gcra), and CheckWindows / FullestWindow check a
// recording with that independent code whatever the mock enforced.
package mockota

import (
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
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
	// Enforce picks how the limit is enforced: EnforceGCRA (the default),
	// EnforceWindow or EnforceNone. HiddenLimit needs EnforceGCRA.
	Enforce Enforcement

	// Credentials are the accepted bearer tokens (with Wire: usernames).
	// Empty accepts any non-empty one, for tests that do not care about
	// authentication.
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

	// MaxConcurrent, when positive, is how many requests of one
	// (credential, endpoint) the vendor works on at once (SiteMinder's
	// pmsXchange allows 3 per account): one more is answered 429 without
	// charging the rate limit. The vendor counts its own running requests
	// (entered, not yet answered) with no code shared with the limiter;
	// PeakConcurrent reports the most it saw, refusals included.
	MaxConcurrent int
	// Gather, when positive, holds each request of a (credential,
	// endpoint), before its Latency, until Gather of them run at once, at
	// most GatherWait, and only until they first have. A test that the
	// fleet lets Gather requests run together then checks that they did
	// whatever the fleet's own latency, with one wait at most in the run:
	// a fleet that allows fewer makes each request wait GatherWait and
	// never reaches Gather.
	Gather     int
	GatherWait time.Duration
	// PublishConcurrency sends MaxConcurrent on every answer as an IETF
	// RateLimit-Policy in concurrent-requests (draft-11 qu).
	PublishConcurrency bool

	// Wire, when set, makes the mock take a vendor's own message format
	// (see Wire) instead of fleetbucket's JSON body, which is the default.
	Wire *Wire

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
	switch c.Enforce {
	case EnforceGCRA, EnforceWindow, EnforceNone:
	default:
		return fmt.Errorf("mockota: Enforce %d, want EnforceGCRA, EnforceWindow or EnforceNone", c.Enforce)
	}
	if c.HiddenLimit != nil && c.Enforce != EnforceGCRA {
		return fmt.Errorf("mockota: HiddenLimit needs Enforce EnforceGCRA, not %v", c.Enforce)
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
	if c.Gather < 0 || c.GatherWait < 0 {
		return fmt.Errorf("mockota: Gather %d, GatherWait %v, want ≥ 0", c.Gather, c.GatherWait)
	}
	if err := c.Wire.validate(); err != nil {
		return err
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

// Enforcement is how the mock decides whether a request fits the limit.
type Enforcement int

const (
	// EnforceGCRA decides with sdk/gcra's token bucket, exact to the
	// microsecond with a manual clock; the only mode with a HiddenLimit.
	EnforceGCRA Enforcement = iota
	// EnforceWindow decides with the mock's own sliding-window log
	// (package window): a request is accepted iff every window ending at it
	// holds at most burst + rate·W accepted requests. It shares no code with
	// sdk/gcra, so a fleet measured against it is judged independently.
	EnforceWindow
	// EnforceNone accepts every well-formed request and only records it, for
	// runs that measure what a fleet sends rather than what a vendor lets
	// through. Rate headers still describe the published limit's window.
	EnforceNone
)

func (e Enforcement) String() string {
	switch e {
	case EnforceGCRA:
		return "gcra"
	case EnforceWindow:
		return "window"
	case EnforceNone:
		return "none"
	}
	return fmt.Sprintf("Enforcement(%d)", int(e))
}

// ParseEnforcement reads the String form, for flags.
func ParseEnforcement(s string) (Enforcement, error) {
	for _, e := range []Enforcement{EnforceGCRA, EnforceWindow, EnforceNone} {
		if s == e.String() {
			return e, nil
		}
	}
	return 0, fmt.Errorf("enforcement %q, want gcra, window or none", s)
}

// windowLimit is l for package window.
func windowLimit(l gcra.Limit) window.Limit { return window.Limit{Rate: l.Rate, Burst: l.Burst} }
