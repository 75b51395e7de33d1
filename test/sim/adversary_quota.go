package sim

import (
	"strconv"
	"strings"
	"time"
)

// The drain a calendar quota needs, derived once every part is drawn.
//
// A part that draws a quota sizes it to the lanes it sees, one request a
// lane, and drains a period or two after the load's. Later parts may
// change both: strict-slow-store puts every property behind one
// credential (twice the lanes on the quota, for seed 35), and a wire
// format that splits by month sends a lane's push as one request per
// calendar month its days span (OpenTravel, split_by month), or per
// max_items. Seed 35's booking channel then needed about 100 requests at
// 18 an hour, six periods, against a drain of three: every lane drained
// by 5 h, and the run ended at 3 h 10 min with 9 lanes still deferred to
// the next reset. A liveness deadline shorter than the quota allows
// proves nothing lost, so the drain lasts until the quota's periods after
// the load's have held one push of every lane on it.
//
// A shadow channel is no exception. It pushes at once, whatever the
// fleet's count, but the vendor's quota holds all the same: past its
// count the vendor answers 429 with a Retry-After to the period's end
// (ota.go; Unchecked spares only the invariant's count), the push is
// deferred to the reset, and the lanes drain at the vendor's count a
// period. Seed 916 (booking in shadow mode, an hourly quota of 60 an
// endpoint, OpenTravel under max_bytes 1024, 10 lanes a kind) had its
// quota skipped: its restrictions endpoint had 60 requests accepted in
// every hour from the first to the fifth, 25-30 more answered 429, and
// the drain, 5 h 13 min from other parts, ended with 5 lanes still
// pending and 58 days stale.

// quotaDrain lengthens sc.Drain to the end of the period in which every
// quota of sc has held pushRequests for each of the lanes that share its
// count (of what a period holds for pushes, pushesAPeriod), counted from
// the period after the load's, plus ten minutes for the jobs spread over
// the minute after a reset.
func quotaDrain(sc *Scenario) {
	for i, c := range sc.Channels {
		q := c.Vendor.Quota
		if q == nil {
			continue
		}
		need := quotaLanes(*sc, c) * pushRequests(*sc, c)
		per := pushesAPeriod(*sc, i)
		_, end := quotaPeriod(q, epoch.Add(sc.Load.Duration))
		for range (need + per - 1) / per {
			_, end = quotaPeriod(q, end)
		}
		sc.Drain = max(sc.Drain, end.Sub(epoch)+10*time.Minute)
	}
}

// pushesAPeriod is how many of channel i's quota count a period holds for
// pushes. The fleet spends a token of the count on every attempt, a 429
// included, since it cannot tell which the vendor counted. A vendor that
// halves its real limit under a published one the buckets keep answers
// 429 to the sends above its half, each with the wait its own bucket
// needs, after which the next send is admitted: at most one 429 a push,
// so half the count. Seed 367 (50 lanes a credential at 3 requests each,
// an hourly quota of 60, a vendor halving 2/s to 1/s) spent 23-27 of each
// hour's 60 on 429s, pushed 34-37, and drained for three periods while
// its lanes needed five: 216 days were stale at 4 h 10 min.
func pushesAPeriod(sc Scenario, i int) int {
	n := sc.Channels[i].Vendor.Quota.Count
	if sc.Faults.HalveAt > 0 && sc.Faults.HalveChannel == i {
		n = max(n/2, 1)
	}
	return n
}

// quotaLanes is how many lanes share one count of c's quota: the vendor
// counts per credential and endpoint (or meter, which two kinds share).
func quotaLanes(sc Scenario, c ChannelSpec) int {
	lanes := (sc.Properties + c.Creds - 1) / c.Creds * max(c.Connections, 1)
	if len(c.Vendor.Meters) > 0 {
		lanes *= 2
	}
	return lanes
}

// pushRequests bounds the requests of one push of a lane of c: one per
// calendar month the load's days span where c splits by month, times the
// messages max_items cuts a month's (or the whole span's) room-rate days
// into, times the bodies max_bytes halves each message into.
func pushRequests(sc Scenario, c ChannelSpec) int {
	days := dayReach(sc)
	rooms := max(sc.Load.Rooms, 1) * max(sc.Load.Plans, 1)
	perMessage := days
	months := 1
	if splitsByMonth(c) {
		months = monthsSpanned(days)
		perMessage = min(days, 31)
	}
	maxItems := 500
	if v, err := strconv.Atoi(c.Keys["max_items"]); err == nil && v > 0 {
		maxItems = v
	}
	items := perMessage * rooms
	messages := (items + maxItems - 1) / maxItems
	return months * messages * bodies(c, min(items, maxItems), rooms)
}

// bodies bounds the requests max_bytes halves a message of items room-rate
// days over cells cells into: halving stops at the first half that fits,
// so every body sent is half of one that did not, and those are at most
// items ÷ fit (fit: the days a body holds), each halved once.
func bodies(c ChannelSpec, items, cells int) int {
	limit, err := strconv.Atoi(c.Keys["max_bytes"])
	if err != nil || limit <= 0 {
		return 1
	}
	day, head := wireBytes(c)
	fit := max((limit-head-cells*cellBytes)/day, 1)
	if items <= fit {
		return 1
	}
	return 2 * ((items + fit - 1) / fit)
}

// wireBytes is about what one rate day with its own value adds to a body
// of c's wire format, and a body's own bytes beside its cells', rounded
// up from bodies of 31 such days (sequences of four digits): json 1,985
// bytes (61 a day), expedia-ar 6,665 (208), opentravel 10,032 (316).
func wireBytes(c ChannelSpec) (day, head int) {
	switch {
	case !c.Vendor.Wire.speaks():
		return 64, 128
	case c.Vendor.Wire.Format == "expedia-ar":
		return 224, 256
	}
	return 320, 256
}

// cellBytes bounds what a cell's names add to a body (a room type and rate
// plan: json's {"room_type":"DBL","rate_plan":"BAR","days":[]}, 47).
const cellBytes = 64

// dayReach is how many days from day0 the run's changes may touch.
func dayReach(sc Scenario) int {
	n := sc.Load.WithinDays
	if sc.Busy != nil {
		n = max(n, 60)
	}
	for _, b := range sc.Bulks {
		n = max(n, b.Days)
	}
	if b := sc.Burst; b != nil {
		n = max(n, b.RangeDays*b.Ranges)
	}
	if p := sc.Reprice; p != nil {
		n = max(n, 7*p.Ranges)
	}
	if o := sc.Onboard; o != nil {
		n = max(n, o.Days)
	}
	return min(max(n, 1), horizon)
}

// splitsByMonth reports whether c sends each calendar month of a push in
// its own requests: its split_by, else its wire format's (docs/configuration.md).
func splitsByMonth(c ChannelSpec) bool {
	if v, ok := c.Keys["split_by"]; ok {
		return strings.Trim(v, `"`) == "month"
	}
	return c.Vendor.Wire != nil && c.Vendor.Wire.Format == "opentravel"
}

// monthsSpanned is the number of calendar months the days day0 … day0+days−1
// fall in.
func monthsSpanned(days int) int {
	last := day0.AddDate(0, 0, days-1)
	return (last.Year()-day0.Year())*12 + int(last.Month()-day0.Month()) + 1
}
