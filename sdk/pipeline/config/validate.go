package config

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Validate reports every problem at once, each naming its place in the file.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MaxRangeDays < 1 || c.MaxRangeDays > 366 {
		add("max_range_days is %d, want 1..366", c.MaxRangeDays)
	}
	if len(c.Channels) == 0 {
		add("channels: none configured")
	}
	if _, err := c.LingerFor(); err != nil {
		errs = append(errs, err)
	}
	push, err := c.pushTimeout()
	if err != nil {
		errs = append(errs, err)
	}
	c.learn = learnSet(push)
	for _, name := range sortedKeys(c.Channels) {
		ch := c.Channels[name]
		at := "channels." + name
		if strings.Contains(name, "#") || name == "" {
			add("%s: channel names may not be empty or contain '#'", at)
		}
		if err := checkBaseURL(ch.BaseURL, ch.AllowHTTP); err != nil {
			add("%s.base_url: %v", at, err)
		}
		if len(ch.Endpoints) == 0 {
			add("%s.endpoints: none configured", at)
		}
		for _, ep := range sortedKeys(ch.Endpoints) {
			if !isKind(ep) {
				add("%s.endpoints.%s: unknown endpoint, want one of %s", at, ep, strings.Join(Kinds, ", "))
			}
			l := ch.Endpoints[ep].Limit
			if err := (limiter.Bucket{Key: "k", Limit: limiter.Limit{Rate: l.Rate, Burst: l.Burst}}).Validate(); err != nil {
				add("%s.endpoints.%s.limit: %v", at, ep, err)
			}
			if p := ch.Endpoints[ep].Path; strings.ContainsAny(p, "?#") || hasDotSegment(p) {
				add("%s.endpoints.%s.path: %q may not hold a query, a fragment or a \".\" / \"..\" segment", at, ep, p)
			}
			errs = append(errs, validateEndpointLimits(at+".endpoints."+ep, ch.Endpoints[ep])...)
			errs = append(errs, validateAdaptive(at+".endpoints."+ep, ch.Endpoints[ep])...)
			errs = append(errs, validateShare(at+".endpoints."+ep, ch.Endpoints[ep])...)
			errs = append(errs, validateLifetime(at+".endpoints."+ep, ch.Endpoints[ep])...)
			errs = append(errs, validateMargin(at+".endpoints."+ep, ch.Endpoints[ep])...)
			errs = append(errs, validateInFlightAndQuota(at+".endpoints."+ep, ch.Endpoints[ep], push)...)
			if m := ch.Endpoints[ep].Mode; m != "" && m != ModeEnforce && m != ModeShadow {
				add("%s.endpoints.%s.mode: %q, want %q (the default) or %q", at, ep, m, ModeEnforce, ModeShadow)
			}
			if o := ch.Endpoints[ep].OnStoreUnavailable; o != "" && o != StoreClosed && o != StoreLocalShare {
				add("%s.endpoints.%s.on_store_unavailable: %q, want %q (the default) or %q", at, ep, o, StoreClosed, StoreLocalShare)
			}
			errs = append(errs, validateCost(at+".endpoints."+ep, ch.Endpoints[ep])...)
			errs = append(errs, validatePriority(at+".endpoints."+ep, ch.Endpoints[ep])...)
			if maxItems, maxBytes := ch.Endpoints[ep].RequestLimits(); maxItems < c.MaxRangeDays || maxItems > 100_000 {
				add("%s.endpoints.%s.max_items: %d, want %d (max_range_days, so one change fits a push) to 100000", at, ep, maxItems, c.MaxRangeDays)
			} else if maxBytes < 1024 || maxBytes > MaxMaxBytes {
				add("%s.endpoints.%s.max_bytes: %d, want 1024 to %d (a push the vendor refuses goes to the dead-letter queue, and an SQS message holds at most 1 MiB)", at, ep, maxBytes, MaxMaxBytes)
			}
		}
		errs = append(errs, validateMeters(at, ch)...)
		errs = append(errs, validateFormat(at, ch)...)
		errs = append(errs, validateRead(at, ch)...)
		if len(ch.Credentials) == 0 {
			add("%s.credentials: none configured", at)
		}
		for _, id := range sortedKeys(ch.Credentials) {
			if id == "" || strings.Contains(id, "#") {
				add("%s.credentials: id %q may not be empty or contain '#'", at, id)
			}
			switch cred := ch.Credentials[id]; {
			case cred.TokenEnv != "" && cred.SecretID != "":
				add("%s.credentials.%s: both token_env and secret_id, want exactly one", at, id)
			case cred.SecretID != "":
				if strings.TrimSpace(cred.SecretID) != cred.SecretID || strings.ContainsAny(cred.SecretID, "{}") {
					add("%s.credentials.%s.secret_id: %q is not a secret name or ARN", at, id, cred.SecretID)
				}
			case cred.TokenEnv == "":
				add("%s.credentials.%s.token_env: empty; set token_env (a local environment variable) or secret_id (a Secrets Manager secret)", at, id)
			case !envName(cred.TokenEnv):
				add("%s.credentials.%s.token_env: %q is not an environment variable name (letters, digits, _)", at, id, cred.TokenEnv)
			}
		}
	}
	for _, pid := range sortedKeys(c.Properties) {
		errs = append(errs, c.ValidateConnections(pid, c.Properties[pid])...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid connections config:\n  %w", errors.Join(errs...))
	}
	return nil
}

// checkBaseURL accepts https://host[:port][/path] (http:// with allowHTTP)
// and nothing that would change where a push goes or what it carries: no
// query or fragment (an endpoint's path is appended to the URL), no user
// info (a credential in the file), no "." or ".." segment (a path that
// climbs out of the API root).
func checkBaseURL(raw string, allowHTTP bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", raw, err)
	}
	switch {
	case u.Scheme == "http" && !allowHTTP:
		return fmt.Errorf("%q is plain http, which sends the token in clear text; use https, or set \"allow_http\": true on the channel (local mock OTAs only)", raw)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "", u.Opaque != "":
		return fmt.Errorf("%q is not an http(s) URL with a host", raw)
	case u.User != nil:
		return fmt.Errorf("%q holds user info; credentials belong in secret_id or token_env", raw)
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("%q has a query string; endpoint paths are appended to base_url", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("%q has a fragment", raw)
	case hasDotSegment(u.Path) || hasDotSegment(u.RawPath):
		return fmt.Errorf("%q has a \".\" or \"..\" path segment", raw)
	}
	return nil
}

// hasDotSegment reports a "." or ".." segment in a path, percent-encoded
// or not.
func hasDotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if dec, err := url.PathUnescape(seg); err == nil {
			seg = dec
		}
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

func envName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

func isKind(s string) bool {
	for _, k := range Kinds {
		if s == k {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
