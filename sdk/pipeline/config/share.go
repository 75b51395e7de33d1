package config

import (
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// ShareSpec is an endpoint's "share" setting: while its bucket idles, an
// execution environment leases part of the rate with the write that books
// its push and sends its next pushes on it with no write, until the epoch
// ends (limiter.Share; "Leased shares" in docs/design.md). Off unless set;
// every field but fraction is optional:
//
//	"share": {"fraction": 0.5, "leases": 8, "burst": 2, "epoch": "60s", "quiet": "15m"}
//
// Defaults: leases DefaultShareLeases (at most burst − 1), burst (the
// tokens one lease banks) DefaultShareBurst while leases × it is at most
// half the endpoint's burst, else 1, epoch DefaultShareEpoch, quiet
// DefaultShareQuiet.
type ShareSpec struct {
	Fraction float64 `json:"fraction"`
	Leases   int     `json:"leases,omitempty"`
	Burst    int     `json:"burst,omitempty"`
	Epoch    string  `json:"epoch,omitempty"`
	Quiet    string  `json:"quiet,omitempty"`
}

const (
	// DefaultShareLeases is how many leases an epoch holds at most.
	DefaultShareLeases = 8
	// DefaultShareBurst is how many tokens a lease banks: an environment's
	// pushes of one bucket come in clumps (an invocation's batch), and a
	// lease that banks one books the rest of each clump with a write. Only
	// while the shared part keeps half the burst: in the small storm, 8
	// leases banking 2 of a burst of 20 left the shared part 4, and its
	// bookings ran so far ahead that 510 pushes were deferred (none
	// with 1).
	DefaultShareBurst = 2
	// DefaultShareEpoch is how long a lease lives at most.
	DefaultShareEpoch = time.Minute
	// DefaultShareQuiet is how long a bucket goes without a write of an
	// earlier release (or a penalty, a reset) before leases are taken:
	// Lambda's longest invocation, so that no worker of the release before
	// a deployment still runs.
	DefaultShareQuiet = 15 * time.Minute
)

// LimiterShare is the endpoint's "share" with its defaults, nil when not set or
// not valid (Validate says why).
func (e Endpoint) LimiterShare() *limiter.Share {
	s := e.Share
	if s == nil {
		return nil
	}
	out := limiter.Share{Fraction: s.Fraction, Leases: s.Leases, Epoch: DefaultShareEpoch, Quiet: DefaultShareQuiet}
	if out.Leases == 0 {
		out.Leases = min(DefaultShareLeases, e.Limit.Burst-1)
	}
	if out.Burst = s.Burst; out.Burst == 0 && out.Leases > 0 {
		out.Burst = max(min(DefaultShareBurst, e.Limit.Burst/(2*out.Leases)), 1)
	}
	var err error
	if s.Epoch != "" {
		if out.Epoch, err = time.ParseDuration(s.Epoch); err != nil {
			return nil
		}
	}
	if s.Quiet != "" {
		if out.Quiet, err = time.ParseDuration(s.Quiet); err != nil {
			return nil
		}
	}
	return &out
}

// validateShare refuses a share the limiter would refuse, and beside
// anything whose writes do not know leases: extra windows, shards and
// per-property shares (transactions), an adaptive rate, an urgent reserve
// (its pushes take from a smaller burst), items (a lease grants one token
// at a time) and a calendar quota.
func validateShare(at string, e Endpoint) []error {
	s := e.Share
	if s == nil {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(at+".share: "+format, args...)) }
	if _, err := time.ParseDuration(s.Epoch); s.Epoch != "" && err != nil {
		add("epoch %q: %v", s.Epoch, err)
	}
	if _, err := time.ParseDuration(s.Quiet); s.Quiet != "" && err != nil {
		add("quiet %q: %v", s.Quiet, err)
	}
	switch {
	case len(e.Limits) > 0, e.Shards != nil && *e.Shards > 1, e.PropertyShare != nil:
		add("not with limits, shards or property_share: a lease is of one bucket")
	case e.Adaptive != nil:
		add("not with adaptive")
	case e.UrgentReserve > 0:
		add("not with urgent_reserve")
	case e.ItemCost() > 0:
		add("not with cost %q: a lease grants one request at a time", e.Cost)
	case e.Quota != nil:
		add("not with quota")
	}
	if len(errs) > 0 {
		return errs
	}
	sh := e.LimiterShare()
	if sh == nil {
		return nil
	}
	lim := limiter.Limit{Rate: e.Limit.Rate, Burst: e.Limit.Burst, Margin: e.KeptMargin()}
	if err := (limiter.Bucket{Key: "k", Limit: lim, Share: sh}).Validate(); err != nil {
		add("%v", err)
	} else if c := sh.SharedLimit(lim, sh.Leases).Capacity(); c < 1 {
		add("the shared part keeps %d tokens at one instant; want ≥ 1", c)
	}
	return errs
}
