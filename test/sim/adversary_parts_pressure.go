package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Parts that keep a feature under pressure long enough for it to matter:
// a vendor that answers some 429s with a long penalty while the fleet
// keeps pushing, a quota endpoint whose pushes fail and retry, a store as
// slow as the emulator's under a wave of changes, and one lane flooded
// with changes while it is owned. They come after the catalogue's own
// parts, so a seed draws every earlier part as it did before them.
func init() { catalogue = append(append(catalogue, pressureParts...), parityParts...) }

var pressureParts = []part{
	{"penalty", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		// A vendor whose own overload answers a share of requests 429,
		// asking for a silence of seconds to minutes (a penalty box),
		// whatever the bucket holds: the fleet must keep the silence.
		c := b.channel(r)
		c.Vendor.Overload = oneOf(r, 0.02, 0.05)
		c.Vendor.Penalty = oneOf(r, 5*time.Second, 30*time.Second, 2*time.Minute)
		if c.Vendor.RetryAfter == "" {
			c.Vendor.RetryAfter = oneOf(r, "", "date")
		}
		return []string{fmt.Sprintf("vendor.overload=%g", c.Vendor.Overload), "vendor.penalty=" + c.Vendor.Penalty.String()}, ""
	}},
	{"slow-store", "config", func(b *build, r *rand.Rand) ([]string, string) {
		// DynamoDB answering a share of calls as the emulator does under
		// a burst (p50 278 ms, p99 480 ms: a throttled partition, a
		// retried write, a GC pause) for a stretch in which every
		// property reprices behind one credential of a channel the wave
		// fills: a grant answered late would leave beside grants made
		// since and answered fast.
		for _, c := range b.sc.Channels {
			if c.Connections > 1 {
				// As for a storm: the wave's fan-out would ask more than
				// the channel sends in the drain.
				return nil, "a repricing wave over many connections a property asks more than the drain sends"
			}
		}
		from := time.Duration(r.IntN(int(b.sc.Load.Duration/time.Second)/2+1)) * time.Second
		span := oneOf(r, 30*time.Second, time.Minute, 3*time.Minute)
		c := b.channel(r)
		c.Creds, c.Rate, c.Burst = 1, oneOf(r, 5.0, 10.0), oneOf(r, 10, 20)
		f := &b.sc.Faults
		f.SlowStore, f.SlowShare = [2]time.Duration{from, from + span}, oneOf(r, 0.05, 0.2, 1)
		f.SlowLatency = Latency{P50: 278 * time.Millisecond, P99: 480 * time.Millisecond}
		f.SlowCap = 1500 * time.Millisecond
		b.sc.Reprice = &Reprice{At: from, Over: min(span, time.Minute) / 2, Ranges: oneOf(r, 1, 2)}
		return []string{"fault.slow_store=" + span.String(), fmt.Sprintf("slow_store.share=%g", f.SlowShare),
			fmt.Sprintf("slow_store.limit=%g/%d", c.Rate, c.Burst)}, ""
	}},
	{"quota-5xx", "config", func(b *build, r *rand.Rand) ([]string, string) {
		// A calendar quota the load uses up, on a vendor down for a
		// stretch: every attempt of a push counts at the vendor, the
		// retries of a push that met a 503 included. The quota holds
		// every lane of a bucket a few times over, so the fleet drains
		// in the periods after the load's. Not on a channel that refuses
		// an unmapped room, which refuse-item keeps off a quota but this
		// part, drawn after it, could put one on: isolating the refused
		// changes spent 32 of seed 264's 57 requests of one credential,
		// and two lanes sharing it were still deferred to the next reset
		// 4 h after the load.
		c := channelIf(b, r, refusesNoItem)
		if c == nil {
			return nil, "every channel refuses an unmapped room, which isolating costs more requests than a quota sized for the load holds"
		}
		lanes := (b.sc.Properties + c.Creds - 1) / c.Creds * max(c.Connections, 1)
		if len(c.Vendor.Meters) > 0 {
			lanes *= 2
		}
		q := &VendorQuota{Count: lanes + oneOf(r, 2, 5, 10), Period: "hour", Zone: oneOf(r, "", "Asia/Kolkata", "America/New_York")}
		setKey(c, "quota", fmt.Sprintf(`{"count": %d, "period": %q, "time_zone": %q}`, q.Count, q.Period, q.Zone))
		c.Vendor.Quota = q
		from := time.Duration(r.IntN(int(b.sc.Load.Duration/time.Second)/2+1)) * time.Second
		c.Vendor.Down = [2]time.Duration{from, from + oneOf(r, 10*time.Second, 30*time.Second, time.Minute)}
		_, end := quotaPeriod(q, epoch.Add(b.sc.Load.Duration))
		_, next := quotaPeriod(q, end)
		_, after := quotaPeriod(q, next)
		b.sc.Drain = max(b.sc.Drain, after.Sub(epoch)+10*time.Minute)
		return []string{fmt.Sprintf("quota.count=lanes+%d", q.Count-lanes), "quota.time_zone=" + q.Zone,
			fmt.Sprintf("vendor.down=%v", c.Vendor.Down[1]-c.Vendor.Down[0])}, ""
	}},
	{"bulk-lane", "load", func(b *build, r *rand.Rand) ([]string, string) {
		// A PMS uploading a room-rate's year day by day: hundreds of
		// single-day changes to one lane within seconds, most of which
		// land while the lane's push is in flight.
		for _, c := range b.sc.Channels {
			if c.Connections > 1 {
				return nil, "a bulk upload fanned out to many connections a property asks more than the drain sends"
			}
		}
		c := b.channel(r)
		kind := indexOf(kindNames, oneOf(r, c.Kinds...))
		bk := Bulk{At: time.Duration(r.IntN(int(b.sc.Load.Duration/time.Second))) * time.Second, Over: oneOf(r, time.Second, 3*time.Second),
			Prop: int32(r.IntN(b.sc.Properties)), Kind: kind, Days: oneOf(r, 300, 400), Rooms: 1 + r.IntN(2)}
		b.sc.Bulks = append(b.sc.Bulks, bk)
		return []string{fmt.Sprintf("load.bulk=%d", bk.Days*bk.Rooms)}, ""
	}},
}

// Bulk is Days single-day changes (from the horizon's first day) to each
// of Rooms room types of property Prop, kind Kind, rate plan 0, sent in a
// random order evenly over Over from At.
type Bulk struct {
	At, Over          time.Duration
	Prop              int32
	Kind, Days, Rooms int
}

// bulk sends b.
func (s *sim) bulk(ctx context.Context, b Bulk, r *rand.Rand) {
	if sleep(ctx, b.At) != nil {
		return
	}
	var all []change
	for room := range b.Rooms {
		for d := range min(b.Days, horizon) {
			all = append(all, change{prop: b.Prop, kind: b.Kind, room: room, from: d, days: 1, value: int32(1 + r.IntN(500))})
		}
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	gap := b.Over / time.Duration(len(all))
	for _, c := range all {
		if ctx.Err() != nil {
			return
		}
		s.send(c)
		_ = sleep(ctx, gap)
	}
}

// Reprice is a wave in which every property changes Ranges ranges of 7
// days of every kind, room type and rate plan, sent in a random order
// evenly over Over from At.
type Reprice struct {
	At, Over time.Duration
	Ranges   int
}

// reprice sends w.
func (s *sim) reprice(ctx context.Context, w Reprice, r *rand.Rand) {
	if sleep(ctx, w.At) != nil {
		return
	}
	l := s.sc.Load
	var all []change
	for p := range s.sc.Properties {
		for kind := range kindNames {
			for room := range l.Rooms {
				for plan := range l.Plans {
					for i := range w.Ranges {
						all = append(all, change{prop: int32(p), kind: kind, room: room, plan: plan, from: 7 * i, days: 7, value: int32(1 + r.IntN(500))})
					}
				}
			}
		}
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	gap := w.Over / time.Duration(len(all))
	for _, c := range all {
		if ctx.Err() != nil {
			return
		}
		s.send(c)
		_ = sleep(ctx, gap)
	}
}
