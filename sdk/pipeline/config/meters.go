package config

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// What vendors meter besides rate and burst: requests in flight at once
// ("max_in_flight", with "lease_hold") and calendar quotas ("quota"):
//
//	"rates": {"path": "/r", "limit": {"rate": 4, "burst": 8},
//	          "max_in_flight": 3, "lease_hold": "30s",
//	          "quota": {"count": 5000, "period": "day", "time_zone": "America/Los_Angeles"}}
//
// max_in_flight caps the fleet's requests of one (credential, meter) at
// once: a push holds a lease from just before its request until its
// answer (limiter.InFlight). lease_hold is how long a lease lasts unless
// released: the bound on how long a worker that dies mid-push keeps its
// slot, and the longest a push may take under it (the dispatcher ends the
// push at its lease's expiry).
//
// quota is a calendar quota: at most count pushes per hour or day in the
// vendor's time zone, reset at the boundary, taken in one transaction with
// the endpoint's rate limits (limiter.TakeWithQuota).

// QuotaSpec is an endpoint's "quota".
type QuotaSpec struct {
	Count  int    `json:"count"`
	Period string `json:"period"`
	// TimeZone is the vendor's IANA zone name; "" is UTC.
	TimeZone string `json:"time_zone,omitempty"`
}

// The push's time, one figure: push_timeout (PushTimeout, default
// otapush.PushTimeout, 20 s) bounds a push with its retries, and is the
// push client's budget and its HTTP client's timeout (sdk/pipeline.New). A
// push under an in-flight lease runs under a context that ends LeaseSlack
// after it, so that the push runs out of its own time first and fails as
// a push (counted, deferred with a backoff), never as the invocation
// ending (docs/design.md, the push's time).

// LeaseSlack is how much of a lease a push needs beyond push_timeout: the
// moments between taking the lease and the request, and between the
// answer and the release. lease_hold is at least push_timeout + LeaseSlack.
const LeaseSlack = time.Second

// leaseStart is what the default lease_hold adds to push_timeout: the
// crash bound leaves room to start the push and read its answer.
const leaseStart = 5 * time.Second

// DefaultLeaseHold is lease_hold when the file leaves it and push_timeout
// out: the push's time (otapush.PushTimeout, 20 s) and 5 s to start the
// request and read the answer. It is the crash bound: a worker that dies
// mid-push frees its slot at most this long after it took it. With a
// push_timeout, the default is that + 5 s.
const DefaultLeaseHold = otapush.PushTimeout + leaseStart

// MinLeaseHold is the shortest lease_hold under a push_timeout of push:
// the push's time and LeaseSlack, since the dispatcher ends a push at its
// lease's expiry (a shorter lease would cut every slow push short).
func MinLeaseHold(push time.Duration) time.Duration { return push + LeaseSlack }

// MaxPushTimeout bounds push_timeout: a lease must hold the push
// (limiter.MaxLeaseHold), and a push longer than a few minutes is a vendor
// that hangs, not one that answers.
const MaxPushTimeout = 5 * time.Minute

// PushTimeout is the time one push may take with its retries: the config's
// push_timeout, otapush.PushTimeout if it sets none. It assumes a
// validated config.
func (c *Config) PushTimeout() time.Duration {
	d, _ := c.pushTimeout()
	return d
}

func (c *Config) pushTimeout() (time.Duration, error) {
	if c.PushTimeoutSetting == "" {
		return otapush.PushTimeout, nil
	}
	d, err := time.ParseDuration(c.PushTimeoutSetting)
	if err != nil || d < 100*time.Millisecond || d > MaxPushTimeout {
		return otapush.PushTimeout, fmt.Errorf("push_timeout: %q, want a Go duration from 100ms to %s (the time one push may take, retries included), or leave it out for %s",
			c.PushTimeoutSetting, MaxPushTimeout, otapush.PushTimeout)
	}
	return d, nil
}

// InFlight is the endpoint's lease set under key (the bucket key), for
// pushes of push_timeout push (Config.PushTimeout); nil when it sets no
// max_in_flight. It assumes a validated endpoint.
func (e Endpoint) InFlight(key string, push time.Duration) *limiter.InFlight {
	if e.MaxInFlight == nil {
		return nil
	}
	hold := push + leaseStart
	if e.LeaseHold != "" {
		hold, _ = time.ParseDuration(e.LeaseHold)
	}
	// A push needs its time and the slack of the lease; a lease with more
	// left passes to the next push of the process with no write.
	return &limiter.InFlight{Key: key, Max: *e.MaxInFlight, Hold: hold, Timeout: MinLeaseHold(push)}
}

// Learn is the lease set a push takes under key while the fleet has
// learned an in-flight cap for its bucket and its endpoint names no
// max_in_flight (dispatch.Route.Learn; a configured one is lowered
// instead): limiter.MaxLeases, held as the default lease_hold holds a
// configured one, its Timeout MinLeaseHold(push_timeout). It depends on
// push_timeout alone, so Validate builds it once (learnSet) and each
// job's route copies it under its key.
func (c *Config) Learn(key string) *limiter.InFlight {
	f := c.learn
	if f.Max == 0 { // a Config that Validate did not build
		f = learnSet(c.PushTimeout())
	}
	f.Key = key
	return &f
}

// learnSet is Learn's lease set, but for its key, under a push_timeout of
// push.
func learnSet(push time.Duration) limiter.InFlight {
	return limiter.InFlight{Max: limiter.MaxLeases, Hold: push + leaseStart, Timeout: MinLeaseHold(push)}
}

// CalendarQuota is the endpoint's quota under key (the bucket key), nil
// when it sets none. The time zone was loaded once at validation; loading
// it again cannot fail but for a zone database removed meanwhile.
func (e Endpoint) CalendarQuota(key string) (*limiter.QuotaBucket, error) {
	if e.Quota == nil {
		return nil, nil
	}
	loc, err := zone(e.Quota.TimeZone)
	if err != nil {
		return nil, err
	}
	q := gcra.Quota{Count: e.Quota.Count, Period: gcra.Period(e.Quota.Period), Location: loc}
	return &limiter.QuotaBucket{Key: key, Quota: q}, q.Validate()
}

// zones caches loaded time zones: a route is resolved per job, and
// time.LoadLocation reads the zone database every time.
var zones sync.Map // name -> *time.Location

func zone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	q, err := gcra.LoadQuota(1, string(gcra.Day), name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, q.Location)
	return q.Location, nil
}

// validateInFlightAndQuota checks max_in_flight, lease_hold and quota; at is the
// endpoint's place in the file, push the config's push_timeout.
func validateInFlightAndQuota(at string, ep Endpoint, push time.Duration) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if n := ep.MaxInFlight; n != nil && (*n < 1 || *n > limiter.MaxLeases) {
		add("%s.max_in_flight: %d, want 1 to %d (leave it out for no bound on requests in flight)", at, *n, limiter.MaxLeases)
	}
	if ep.LeaseHold != "" {
		d, err := time.ParseDuration(ep.LeaseHold)
		switch {
		case ep.MaxInFlight == nil:
			add("%s.lease_hold: set without max_in_flight; a lease is held only under max_in_flight", at)
		case err != nil:
			add("%s.lease_hold: %q is not a duration, want e.g. \"30s\"", at, ep.LeaseHold)
		case d < MinLeaseHold(push) || d > limiter.MaxLeaseHold:
			add("%s.lease_hold: %s, want %s (push_timeout %s + %s: the push ends when its lease does) to %s (limiter.MaxLeaseHold)",
				at, ep.LeaseHold, MinLeaseHold(push), push, LeaseSlack, limiter.MaxLeaseHold)
		}
	}
	q := ep.Quota
	if q == nil {
		return errs
	}
	if _, err := gcra.LoadQuota(q.Count, q.Period, q.TimeZone); err != nil {
		var arg *gcra.ArgumentError
		if errors.As(err, &arg) {
			// quota.count: … under the endpoint's path.
			add("%s.%s: %s", at, arg.Field, arg.Reason)
		} else {
			add("%s.quota: %v", at, err)
		}
	}
	buckets := 1 + len(ep.Limits)
	if ep.PropertyShare != nil {
		buckets++
	}
	switch {
	case ep.Adaptive != nil:
		// One transaction charges the quota with the rate limits, and a
		// transaction hands back no state to learn a rate from.
		add("%s.quota: cannot be combined with adaptive (the quota is taken in one transaction with fixed limits)", at)
	case ep.Shards != nil && *ep.Shards > 1:
		add("%s.quota: cannot be combined with shards", at)
	case ep.Cost == CostItems:
		add("%s.quota: counts requests; it cannot be combined with cost %q", at, CostItems)
	case ep.UrgentReserve > 0:
		add("%s.quota: cannot be combined with urgent_reserve (a quota push takes a token now; it books no slot ahead)", at)
	case buckets+1 > limiter.MaxMultiBuckets:
		add("%s.quota: %d buckets and the quota, at most %d items in one transaction", at, buckets, limiter.MaxMultiBuckets)
	}
	return errs
}
