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

// DefaultLeaseHold is lease_hold when the file leaves it out: the push's
// whole budget with its retries (otapush.DefaultPolicy.MaxElapsed, 20 s,
// what the sync function pushes under) and 5 s to start the request and
// read the answer. It is the crash bound: a worker that dies mid-push
// frees its slot at most this long after it took it.
const DefaultLeaseHold = 25 * time.Second

// MinLeaseHold is the shortest lease_hold: the push's budget, since the
// dispatcher ends a push at its lease's expiry (a shorter lease would cut
// every slow push and its retries short).
var MinLeaseHold = otapush.DefaultPolicy.MaxElapsed

// InFlight is the endpoint's lease set under key (the bucket key), nil
// when it sets no max_in_flight. It assumes a validated endpoint.
func (e Endpoint) InFlight(key string) *limiter.InFlight {
	if e.MaxInFlight == nil {
		return nil
	}
	hold := DefaultLeaseHold
	if e.LeaseHold != "" {
		hold, _ = time.ParseDuration(e.LeaseHold)
	}
	// A push needs its budget of the lease; a lease with more left passes
	// to the next push of the process with no write.
	return &limiter.InFlight{Key: key, Max: *e.MaxInFlight, Hold: hold, Timeout: MinLeaseHold}
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
// endpoint's place in the file.
func validateInFlightAndQuota(at string, ep Endpoint) []error {
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
		case d < MinLeaseHold || d > limiter.MaxLeaseHold:
			add("%s.lease_hold: %s, want %s (a push's budget, retries included: the push ends when its lease does) to %s (limiter.MaxLeaseHold)",
				at, ep.LeaseHold, MinLeaseHold, limiter.MaxLeaseHold)
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
