package config

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// WindowSpec is one extra limit of an endpoint, as written in the file:
// exactly one of rate (per second) and per_minute, and a burst.
type WindowSpec struct {
	Rate      float64 `json:"rate,omitempty"`       // requests per second
	PerMinute float64 `json:"per_minute,omitempty"` // requests per minute
	Burst     int     `json:"burst"`
}

// Limit is the spec as a limiter.Limit.
func (w WindowSpec) Limit() limiter.Limit {
	if w.PerMinute != 0 {
		return limiter.PerMinute(w.PerMinute, w.Burst)
	}
	return limiter.PerSecond(w.Rate, w.Burst)
}

// EndpointLimits is everything a push to one (credential, endpoint) draws
// from. An endpoint in the connections file may say, besides its "limit":
//
//	"rates": {
//	  "path": "/v1/rates",
//	  "limit": {"rate": 10, "burst": 10},
//	  "limits": [{"per_minute": 300, "burst": 300}],
//	  "property_share": {"rate": 1, "burst": 2}
//	}
//
//	"availability": {"path": "/v1/availability", "limit": {"rate": 400, "burst": 200}, "shards": 4}
//
// The three optional settings:
//
//   - "limits": further limits the OTA enforces on the same credential and
//     endpoint at once, typically a per-minute window beside the
//     per-second "limit". Each is its own bucket (key#w<i>, i its index in
//     the list), and a push takes from all of them in one transaction
//     (limiter.TakeMulti / ReserveMulti): all grant or none is charged.
//     Each entry has exactly one of "rate" and "per_minute". A per-minute
//     limit whose rate (per_minute/60) is above limit.rate is refused: it
//     would never bind, and is most likely a per-second figure by mistake.
//     A per-second entry must be tighter than "limit" in rate or burst.
//   - "property_share": each property's own bucket (key#p#<property id>),
//     nested inside the credential's: taken in the same transaction, so a
//     property over its share cannot use the credential's tokens, and the
//     quiet properties keep theirs. It may not exceed "limit" in rate or
//     burst. A common choice is the limit divided by the number of
//     properties on the credential.
//   - "shards": spread a hot "limit" over k items (limiter.ShardedBucket:
//     rate/k each, the burst split with the remainder to the first shards).
//     It must be ≥ 1 (1 is the same as leaving it out), at most the burst
//     (every shard needs a token), and the shard rate must stay a valid
//     limit that rounding does not shrink by more than 1%. Sharding is for
//     a single hot limit: it cannot be combined with "limits" or
//     "property_share", whose buckets would still be single items written
//     by every push.
//
// At most limiter.MaxMultiBuckets buckets in all (one transaction).
// Every problem is reported with its place, like the other checks of the
// file (channels.bk.endpoints.rates.limits[0].per_minute: …).
type EndpointLimits struct {
	// Limit is the endpoint's "limit".
	Limit limiter.Limit
	// Extra are the "limits", in order.
	Extra []limiter.Limit
	// Shards is "shards", 1 when not set.
	Shards int
	// PropertyShare is "property_share", nil when not set.
	PropertyShare *limiter.Limit
	// Adaptive is "adaptive" with its defaults, nil when not set. The
	// config allows it only on an endpoint with a single bucket.
	Adaptive *limiter.Adaptive
	// Share is "share" with its defaults, nil when not set. The config
	// allows it only on an endpoint with a single bucket.
	Share *limiter.Share
}

// Limits returns the limits of a channel's endpoint.
func (c *Config) Limits(channel, endpoint string) (EndpointLimits, error) {
	ch, ok := c.Channels[channel]
	if !ok {
		return EndpointLimits{}, fmt.Errorf("unknown channel %q", channel)
	}
	ep, ok := ch.Endpoints[endpoint]
	if !ok {
		return EndpointLimits{}, fmt.Errorf("channel %q has no endpoint %q", channel, endpoint)
	}
	// Every bucket of the endpoint keeps its margin: the vendor counts
	// each of its limits at arrival.
	out := EndpointLimits{Limit: ep.withMargin(limiter.Limit{Rate: ep.Limit.Rate, Burst: ep.Limit.Burst}), Shards: 1}
	for _, w := range ep.Limits {
		out.Extra = append(out.Extra, ep.withMargin(w.Limit()))
	}
	if ep.Shards != nil {
		out.Shards = *ep.Shards
	}
	if s := ep.PropertyShare; s != nil {
		share := ep.withMargin(limiter.Limit{Rate: s.Rate, Burst: s.Burst})
		out.PropertyShare = &share
	}
	out.Adaptive = ep.AdaptiveLimit()
	out.Share = ep.LimiterShare()
	return out, nil
}

// Buckets lists the buckets a push for property draws from, to be taken
// together with limiter.TakeMulti or ReserveMulti: the (credential,
// endpoint) bucket under key, one per extra limit (key#w<i>), and the
// property's share (key#p#<property>) when there is one. With Shards > 1
// use Sharded instead. An adaptive endpoint's bucket carries its Adaptive.
func (e EndpointLimits) Buckets(key, property string) []limiter.Bucket {
	out := []limiter.Bucket{{Key: key, Limit: e.Limit, Adaptive: e.Adaptive, Share: e.Share}}
	for i, l := range e.Extra {
		out = append(out, limiter.Bucket{Key: key + "#w" + strconv.Itoa(i), Limit: l})
	}
	if e.PropertyShare != nil {
		out = append(out, limiter.Bucket{Key: key + "#p#" + property, Limit: *e.PropertyShare})
	}
	return out
}

// Sharded is the endpoint's bucket under key spread over its shards, for
// limiter.TakeSharded and ReserveSharded (one shard: the plain key).
func (e EndpointLimits) Sharded(key string) limiter.ShardedBucket {
	return limiter.ShardedBucket{Key: key, Limit: e.Limit, Shards: e.Shards}
}

// validateEndpointLimits checks an endpoint's optional limits, shards and
// property share; at is the endpoint's place in the file.
func validateEndpointLimits(at string, ep Endpoint) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	primary := limiter.Limit{Rate: ep.Limit.Rate, Burst: ep.Limit.Burst}
	primaryOK := primary.Validate() == nil
	buckets := 1 + len(ep.Limits)
	if ep.PropertyShare != nil {
		buckets++
	}
	if buckets > limiter.MaxMultiBuckets {
		add("%s.limits: %d buckets with limit and property_share, at most %d (one transaction)", at, buckets, limiter.MaxMultiBuckets)
	}
	for i, w := range ep.Limits {
		wat := fmt.Sprintf("%s.limits[%d]", at, i)
		switch {
		case w.Rate != 0 && w.PerMinute != 0:
			add("%s: both rate and per_minute, want exactly one", wat)
			continue
		case w.Rate == 0 && w.PerMinute == 0:
			add("%s: neither rate nor per_minute, want exactly one", wat)
			continue
		}
		l := w.Limit()
		if err := l.Validate(); err != nil {
			if w.PerMinute != 0 && l.Burst >= 1 {
				add("%s.per_minute: %v per minute is refused: %v", wat, w.PerMinute, err)
			} else {
				add("%s: %v", wat, err)
			}
			continue
		}
		switch {
		case !primaryOK:
		case w.PerMinute != 0 && l.Rate > primary.Rate:
			add("%s.per_minute: %v per minute is %.4g/s, above limit.rate %v/s: a per-minute limit looser than the per-second one never binds (a per-second figure by mistake?)",
				wat, w.PerMinute, l.Rate, primary.Rate)
		case w.Rate != 0 && l.Rate >= primary.Rate && l.Burst >= primary.Burst:
			add("%s: rate %v burst %d is no tighter than limit (rate %v burst %d): it never binds", wat, l.Rate, l.Burst, primary.Rate, primary.Burst)
		}
	}
	if s := ep.PropertyShare; s != nil {
		share := limiter.Limit{Rate: s.Rate, Burst: s.Burst}
		switch err := share.Validate(); {
		case err != nil:
			add("%s.property_share: %v", at, err)
		case primaryOK && (share.Rate > primary.Rate || share.Burst > primary.Burst):
			add("%s.property_share: rate %v burst %d exceeds limit (rate %v burst %d): a share cannot be larger than the whole", at, share.Rate, share.Burst, primary.Rate, primary.Burst)
		}
	}
	if ep.Shards != nil {
		k := *ep.Shards
		switch {
		case k < 1:
			add("%s.shards: %d, want ≥ 1", at, k)
		case k > 1 && (len(ep.Limits) > 0 || ep.PropertyShare != nil):
			add("%s.shards: %d shards cannot be combined with limits or property_share", at, k)
		case k > 1 && primaryOK:
			if _, err := limiter.SplitLimit(primary, k); err != nil {
				add("%s.shards: %v", at, err)
			}
		}
	}
	return errs
}

// validateCost checks an endpoint's cost and item_weight; at is the
// endpoint's place in the file.
func validateCost(at string, ep Endpoint) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch ep.Cost {
	case "", CostRequests:
		if ep.ItemWeight != 0 {
			add("%s.item_weight: %v, but cost is %q: set cost to %q to meter items", at, ep.ItemWeight, CostRequests, CostItems)
		}
		return errs
	case CostItems:
	default:
		return append(errs, fmt.Errorf("%s.cost: %q, want %q (the default) or %q", at, ep.Cost, CostRequests, CostItems))
	}
	w := ep.ItemCost()
	switch {
	case math.IsNaN(w) || math.IsInf(w, 0) || w <= 0 || w > 1000:
		add("%s.item_weight: %v, want more than 0 and at most 1000", at, ep.ItemWeight)
	case int(math.Ceil(w)) > ep.Limit.Burst && ep.Limit.Burst >= 1:
		add("%s.item_weight: %v tokens per item exceeds limit.burst %d: not even one item could be pushed", at, w, ep.Limit.Burst)
	case ep.UrgentReserve > 0 && !ep.Urgent() && int(math.Ceil(w)) > ep.Limit.Burst-ep.UrgentReserve && ep.Limit.Burst > ep.UrgentReserve:
		add("%s.item_weight: %v tokens per item exceeds limit.burst − urgent_reserve (%d), the share of normal pushes: not even one item could be pushed; lower urgent_reserve or item_weight",
			at, w, ep.Limit.Burst-ep.UrgentReserve)
	}
	if len(ep.Limits) > 0 || ep.Shards != nil || ep.PropertyShare != nil {
		// A push books its items' tokens in one bucket, after its slot.
		add("%s.cost: %q meters one bucket: it cannot be combined with limits, shards or property_share", at, CostItems)
	}
	return errs
}

// validatePriority checks an endpoint's priority and urgent_reserve; at is
// the endpoint's place in the file.
func validatePriority(at string, ep Endpoint) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p := ep.Priority; p != "" && p != PriorityNormal && p != PriorityUrgent {
		add("%s.priority: %q, want %q (the default) or %q", at, p, PriorityNormal, PriorityUrgent)
	}
	switch r := ep.UrgentReserve; {
	case r == 0:
	case r < 0 || (ep.Limit.Burst >= 1 && r >= ep.Limit.Burst):
		add("%s.urgent_reserve: %d, want 0 (none) to limit.burst − 1 (%d): normal pushes need a token of the burst", at, r, ep.Limit.Burst-1)
	case ep.Shards != nil:
		add("%s.urgent_reserve: cannot be combined with shards", at)
	case len(ep.Limits) > 0 || ep.PropertyShare != nil:
		// Normal pushes would leave the reserve free in "limit" only, and
		// take it in the other buckets an urgent push needs too.
		add("%s.urgent_reserve: cannot be combined with limits or property_share: the reserve is kept in limit's bucket only; drop urgent_reserve, or give urgent pushes their own meter", at)
	}
	if strings.Contains(ep.Meter, "#") {
		add("%s.meter: %q may not contain '#'", at, ep.Meter)
	}
	return errs
}

// validateMeters checks that the endpoints of a channel that share a meter
// declare the same limits: one bucket cannot have two.
func validateMeters(at string, ch Channel) []error {
	var errs []error
	first := map[string]string{} // meter -> first endpoint seen on it
	for _, name := range sortedKeys(ch.Endpoints) {
		m := ch.MeterOf(name)
		f, seen := first[m]
		if !seen {
			first[m] = name
			continue
		}
		if !sameLimits(ch.Endpoints[f], ch.Endpoints[name]) {
			errs = append(errs, fmt.Errorf("%s.endpoints.%s: shares meter %q with %s but not its limits (limit, limits, shards, property_share, cost, item_weight, urgent_reserve, max_in_flight, lease_hold, quota, adaptive, throttle must match)", at, name, m, f))
		}
	}
	return errs
}

func sameLimits(a, b Endpoint) bool {
	key := func(e Endpoint) string {
		// One bucket learns one rate from one set of signals.
		j, _ := json.Marshal([]any{e.Limit, e.Limits, e.Shards, e.PropertyShare, e.Cost, e.ItemCost(), e.UrgentReserve, e.AdaptiveLimit(), e.Signals(), e.MaxInFlight, e.LeaseHold, e.Quota})
		return string(j)
	}
	return key(a) == key(b)
}
