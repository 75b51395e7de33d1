package sim

import (
	"maps"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// weightedLog is window.Log for arrivals that weigh n tokens each (a push
// of n items on an endpoint that meters items): every window
// [a_i, now] may hold at most burst + rate·(now − a_i) tokens, the new
// arrival's included. Written here, apart from sdk/gcra, for the same
// reason window is.
type weightedLog struct {
	at []time.Time
	n  []float64
}

// admit decides an arrival of n tokens at now. record keeps it whatever
// the decision (a check of what was sent); otherwise only an admitted
// arrival is kept (a vendor that enforces). wait is, when refused, how long
// until the same arrival would fit.
func (g *weightedLog) admit(now time.Time, n float64, l window.Limit, record bool) (ok bool, wait time.Duration) {
	ok = n <= float64(l.Burst)+1e-9
	sum := n
	for i := len(g.at) - 1; i >= 0; i-- {
		sum += g.n[i]
		// sum − burst > rate·w, in nanoseconds as window does, with the
		// same half-nanosecond of slack.
		if (sum-float64(l.Burst))*1e9 > l.Rate*float64(now.Sub(g.at[i]).Nanoseconds())+0.5 {
			ok = false
			at := g.at[i].Add(time.Duration(math.Ceil((sum - float64(l.Burst)) * 1e9 / l.Rate)))
			wait = max(wait, at.Sub(now))
		}
	}
	if ok || record {
		g.at, g.n = append(g.at, now), append(g.n, n)
		g.prune(l)
	}
	return ok, max(wait, 0)
}

// prune drops the oldest arrival while those from it to the newest, the
// newest left out, fit within the rate alone over their span: then every
// window from it fits whenever the one from the newest does.
func (g *weightedLog) prune(l window.Limit) {
	last := len(g.at) - 1
	sum := 0.0
	for i := 0; i < last; i++ {
		sum += g.n[i]
	}
	drop := 0
	for drop < last && sum <= l.Rate*g.at[last].Sub(g.at[drop]).Seconds() {
		sum -= g.n[drop]
		drop++
	}
	g.at, g.n = g.at[drop:], g.n[drop:]
}

// quotaPeriod is the start and end of the calendar period holding now in
// the quota's zone (a DST day is 23 or 25 hours).
func quotaPeriod(q *VendorQuota, now time.Time) (from, to time.Time) {
	loc := time.UTC
	if q.Zone != "" {
		if l, err := time.LoadLocation(q.Zone); err == nil {
			loc = l
		}
	}
	t := now.In(loc)
	if q.Period == "hour" {
		from = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc)
		return from, from.Add(time.Hour)
	}
	from = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	return from, from.AddDate(0, 0, 1)
}

// keepsMargin reports whether every endpoint of c keeps a margin, read
// from docs/configuration.md rather than the config package: its "margin"
// where set, else 100 ms cut to what the burst can spare, which is
// nothing where the burst holds no more than one push's tokens (an item's
// weight where cost is items) and the urgent reserve a normal push leaves.
func keepsMargin(c ChannelSpec) bool {
	for _, k := range c.Kinds {
		keys := map[string]string{}
		maps.Copy(keys, c.Keys)
		maps.Copy(keys, c.KindKeys[k])
		if m, ok := keys["margin"]; ok {
			d, err := time.ParseDuration(strings.Trim(m, `"`))
			if err != nil || d <= 0 {
				return false
			}
			continue
		}
		need := 1.0
		if keys["cost"] == `"items"` {
			w, _ := strconv.ParseFloat(keys["item_weight"], 64)
			need = max(math.Ceil(w), 1)
		}
		if res, ok := keys["urgent_reserve"]; ok && keys["priority"] != `"urgent"` {
			n, _ := strconv.Atoi(res)
			need += float64(n)
		}
		if float64(c.Burst) <= need {
			return false
		}
	}
	return true
}

// noMarginAllowance is what a channel whose buckets keep no margin may
// send over burst + rate·W while the store is slow: docs/design.md's
// b + r·(W + d_max), d_max a grant's two writes at the slow store's
// longest and the clock skew, and b/2 tokens for the dispatcher's grace
// where there is no margin (half the burst's refill, (b−1)/2 tokens, but
// at least one interval, 1 token: b/2 covers it from a burst of 2, and
// the slow store's writes dwarf the half token it leaves out at a burst
// of 1).
func noMarginAllowance(c ChannelSpec, f Faults) int {
	return int(math.Ceil(c.Rate*(2*f.SlowCap.Seconds()+f.ClockSkew.Seconds()) + float64(c.Burst)/2))
}
