package config

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// AdaptiveSpec is an endpoint's "adaptive" setting: learn the vendor's real
// limit instead of trusting "limit", which stays the most the fleet sends.
// A throttle halves the fleet's rate (not below min_rate); after
// quiet_seconds with no change it climbs back by increase tokens/s per
// second; a limit the vendor publishes lower than the rate lowers it (see
// limiter.Adaptive). Every field is optional:
//
//	"adaptive": {"min_rate": 0.5, "quiet_seconds": 30, "increase": 0.25}
//
// Defaults: min_rate limit.rate/16, quiet_seconds DefaultQuietSeconds,
// increase limit.rate/20 per second (half the rate back in 10 s).
type AdaptiveSpec struct {
	MinRate      float64 `json:"min_rate,omitempty"`
	QuietSeconds float64 `json:"quiet_seconds,omitempty"`
	Increase     float64 `json:"increase,omitempty"`
}

// DefaultQuietSeconds is how long a learned rate holds before it climbs,
// unless an endpoint says otherwise: each climb above the vendor's limit
// costs a 429 (the fleet's other slots at the probing rate are revoked,
// see limiter.Reservation.Probing), so this bounds how often the fleet
// probes: a minute, and two or four after failed probes, keeps a fleet at
// a hidden limit under one 429 a minute, and finds a raised limit within
// four minutes and the climb.
const DefaultQuietSeconds = 60

// ThrottleSpec is an endpoint's "throttle" setting: how its vendor shows
// throttling (otapush.Signals). Every field is optional:
//
//	"throttle": {"statuses": [429, 403],
//	             "headers": [{"preset": "ietf"},
//	                         {"preset": "x-ratelimit", "window_seconds": 60},
//	                         {"remaining": "Rate-Limit-Minute-Remaining", "unit": "percent"},
//	                         {"remaining": "EG-Rate-Limit-Remaining-Minute", "limit": "EG-Rate-Limit-Minute", "window_seconds": 60}],
//	             "low_remaining": 1, "low_percent": 5}
//
// Defaults are otapush.DefaultSignals: statuses [429]; headers the IETF
// RateLimit fields and X-RateLimit-Remaining; drain below 1 request or 5%
// left. Presets: "ietf", "x-ratelimit", "eg-rate-limit" (Expedia XAP),
// "expedia-rapid" (a percentage). A "limit" header is a quota per
// window_seconds, which must be given.
type ThrottleSpec struct {
	Statuses     []int        `json:"statuses,omitempty"`
	Headers      []HeaderSpec `json:"headers,omitempty"`
	LowRemaining *int         `json:"low_remaining,omitempty"`
	LowPercent   *float64     `json:"low_percent,omitempty"`
}

// HeaderSpec is one family of rate-limit headers, as written in the file;
// see otapush.HeaderSpec.
type HeaderSpec struct {
	Preset        string  `json:"preset,omitempty"`
	Remaining     string  `json:"remaining,omitempty"`
	Unit          string  `json:"unit,omitempty"`
	Limit         string  `json:"limit,omitempty"`
	WindowSeconds float64 `json:"window_seconds,omitempty"`
}

// AdaptiveLimit is the endpoint's adaptive setting with its defaults, nil
// when the endpoint does not adapt.
func (e Endpoint) AdaptiveLimit() *limiter.Adaptive {
	a := e.Adaptive
	if a == nil {
		return nil
	}
	out := limiter.Adaptive{MinRate: a.MinRate, Quiet: seconds(a.QuietSeconds), Increase: a.Increase}
	if out.MinRate == 0 {
		out.MinRate = e.Limit.Rate / 16
	}
	if a.QuietSeconds == 0 {
		out.Quiet = DefaultQuietSeconds * time.Second
	}
	if out.Increase == 0 {
		out.Increase = e.Limit.Rate / 20
	}
	return &out
}

// Signals is how the endpoint's vendor throttles, defaults applied.
func (e Endpoint) Signals() otapush.Signals {
	s := otapush.DefaultSignals
	t := e.Throttle
	if t == nil {
		return s
	}
	if len(t.Statuses) > 0 {
		s.Statuses = t.Statuses
	}
	if len(t.Headers) > 0 {
		s.Headers = make([]otapush.HeaderSpec, len(t.Headers))
		for i, h := range t.Headers {
			s.Headers[i] = otapush.HeaderSpec{Preset: h.Preset, Remaining: h.Remaining, Unit: h.Unit, Limit: h.Limit, Window: seconds(h.WindowSeconds)}
		}
	}
	if t.LowRemaining != nil {
		s.LowRemaining = *t.LowRemaining
	}
	if t.LowPercent != nil {
		s.LowPercent = *t.LowPercent
	}
	return s
}

// Signals returns the throttle signals of the bucket whose key
// (channel#credential#meter, as BucketKey builds it) is key, and false for
// a key of no configured endpoint: it is what otapush.WithSignals takes.
// The endpoints of a meter declare the same signals (validateMeters).
func (c *Config) Signals(key string) (otapush.Signals, bool) {
	parts := strings.Split(key, "#")
	if len(parts) != 3 {
		return otapush.Signals{}, false
	}
	ch := c.Channels[parts[0]]
	for _, name := range sortedKeys(ch.Endpoints) {
		if ch.MeterOf(name) == parts[2] {
			return ch.Endpoints[name].Signals(), true
		}
	}
	return otapush.Signals{}, false
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// validateAdaptive checks an endpoint's adaptive and throttle settings; at
// is the endpoint's place in the file.
func validateAdaptive(at string, ep Endpoint) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if a := ep.Adaptive; a != nil {
		primary := limiter.Limit{Rate: ep.Limit.Rate, Burst: ep.Limit.Burst}
		switch {
		case math.IsNaN(a.QuietSeconds) || a.QuietSeconds < 0 || a.QuietSeconds > 86400:
			add("%s.adaptive.quiet_seconds: %v, want 0 (the default, %d) to 86400", at, a.QuietSeconds, DefaultQuietSeconds)
		case math.IsNaN(a.MinRate) || a.MinRate < 0:
			add("%s.adaptive.min_rate: %v, want > 0 (default limit.rate/16)", at, a.MinRate)
		case math.IsNaN(a.Increase) || a.Increase < 0:
			add("%s.adaptive.increase: %v, want > 0 tokens/s per second (default limit.rate/20)", at, a.Increase)
		case len(ep.Limits) > 0 || ep.PropertyShare != nil || ep.Shards != nil && *ep.Shards > 1:
			add("%s.adaptive: cannot be combined with limits, property_share or shards (those take several buckets in one transaction, whose answer carries no learned rate)", at)
		case primary.Validate() == nil:
			if err := ep.AdaptiveLimit().Validate(primary); err != nil {
				add("%s.%v", at, strings.TrimPrefix(err.Error(), "invalid "))
			}
		}
	}
	if ep.Throttle != nil {
		if err := ep.Signals().Validate(); err != nil {
			add("%s.throttle.%v", at, err)
		}
		for i, h := range ep.Throttle.Headers {
			if math.IsNaN(h.WindowSeconds) || h.WindowSeconds < 0 || h.WindowSeconds > 366*86400 {
				add("%s.throttle.headers[%d].window_seconds: %v, want > 0 and at most a year", at, i, h.WindowSeconds)
			}
		}
	}
	return errs
}
