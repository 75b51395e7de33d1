package sim

import (
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Parts about silences longer than the push client's own default wait
// (otapush.DefaultPolicy.DefaultRetryAfter, 2 s): a vendor that puts each
// bucket in a penalty box once, asking for the silence in a form the
// message formats do not read themselves, while the fleet keeps pushing.
// They come after the pressure parts, so a seed draws every earlier part
// as it did before them.
func init() { catalogue = append(catalogue, silenceParts...) }

var silenceParts = []part{
	{"penalty-box", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		// Each bucket's first request from a moment of the load on is
		// answered 429 with a silence of 10 s to 2 min said only in the
		// IETF RateLimit fields (r=0, t: draft-11 makes t the wait), or
		// with a Retry-After of a day, which the client clamps to its
		// documented 15 minutes. Either way the wait is the client's to
		// read from the answer, and much longer than its default.
		c := b.channel(r)
		at := time.Duration(1+r.IntN(int(b.sc.Load.Duration/time.Second)/2+1)) * time.Second
		form := oneOf(r, "ratelimit", "huge")
		wait := oneOf(r, 10*time.Second, 30*time.Second, 2*time.Minute)
		if form == "ratelimit" && !readsRateLimit(c) {
			// The operator told the client to read no IETF fields: the
			// default wait is then the config's, not a defect.
			form = "huge"
		}
		c.Vendor.Box, c.Vendor.BoxFor, c.Vendor.RetryAfter = at, wait, form
		if form == "huge" {
			c.Vendor.BoxFor = 24 * time.Hour
			// Every 429 of this vendor then asks a day (a halving's, a
			// concurrency cap's): each costs its bucket the client's 15
			// minutes, as for the retry-after part's "huge".
			b.sc.Drain = max(b.sc.Drain, 4*time.Hour)
		}
		return []string{"vendor.penalty_box=" + form, "vendor.penalty_box.for=" + c.Vendor.BoxFor.String()}, ""
	}},
}

// readsRateLimit reports whether the channel's push client reads the IETF
// RateLimit fields, by docs/configuration.md: with no "throttle" key the
// defaults read them, as does a "throttle" key without headers; one with
// headers reads them only if they name the "ietf" preset. A vendor sending malformed fields beside them is not
// read either.
func readsRateLimit(c *ChannelSpec) bool {
	if c.Vendor.RateLimitHeaders == "malformed" {
		return false
	}
	t, ok := c.Keys["throttle"]
	return !ok || !strings.Contains(t, `"headers"`) || strings.Contains(t, `"ietf"`)
}

// silenceDrain lengthens sc.Drain to hold the silences a vendor that
// overloads (penalty) imposes on one push of every lane: each 429 silences
// its bucket for what it asks (the penalty, in whole seconds and one more
// for an HTTP-date's rounding; the client's 15-minute cap for a day,
// retry-after or penalty-box "huge"), and a bucket sends only between its
// silences, so they add up. A bucket of n requests meets n·p/(1−p) of them
// on average (a refused request is sent again, and may be refused again),
// counted here with three standard deviations over, and one more for the
// box's own or a halving's. Seed 103 (192 lanes of 64 connections on one
// credential, 5% overload, a day asked) met 16 in its 4 h drain: 4 h of
// silence, and 428 days still stale. Seed 42 (64 lanes a bucket, 5%
// overload, 2 minutes asked) drained its busiest bucket by 55 min, 42 of
// them silent (21 429s), 7 under requests, under 6 idle, and in 2 runs of
// 5 went past the hour the drain had held with no penalty counted.
//
// A vendor with a concurrency cap the config does not name
// (vendor-in-flight) that asks a day of each 429 imposes a silence per
// request: when a silence ends, every lane of the bucket is due together,
// the first request in takes the cap and the next one silences the bucket
// again, n in all. Seeds 332 and 380 (11 lanes an endpoint, a cap of 1)
// sent one request an endpoint a quarter hour, 16 in their 4 h drain.
func silenceDrain(sc *Scenario) {
	for _, c := range sc.Channels {
		v := c.Vendor
		capped := v.InFlight > 0 && v.RetryAfter == "huge"
		if v.Overload <= 0 && !capped || v.Unchecked {
			continue
		}
		n := float64(quotaLanes(*sc, c) * pushRequests(*sc, c))
		silence := asked(v)
		if v.Overload > 0 {
			mean := n * v.Overload / (1 - v.Overload)
			silence += time.Duration(math.Ceil(mean+3*math.Sqrt(mean))) * asked(v)
		}
		if capped {
			silence += time.Duration(n) * retryAfterCap
		}
		sc.Drain = max(sc.Drain, sc.Load.Duration+silence+10*time.Minute)
	}
}

// asked is the silence each 429 of an overloading vendor asks of its
// bucket, as the vendor answers it (ota.go's retryAfter): a day, which the
// client caps; none, which the client waits its default 2 s for; or the
// penalty (at least a second) in whole seconds, one more in an HTTP-date.
func asked(v VendorSpec) time.Duration {
	switch v.RetryAfter {
	case "huge":
		return retryAfterCap
	case "none":
		return 2 * time.Second
	}
	wait := max(v.Penalty, time.Second)
	wait = (wait + time.Second - 1).Truncate(time.Second)
	if v.RetryAfter == "date" {
		wait += time.Second
	}
	return min(wait, retryAfterCap)
}
