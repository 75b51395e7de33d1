package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// A store as slow as the emulator's under a burst while a strict vendor's
// bucket is kept full: grants answered late then leave beside grants made
// since and answered fast, which only the margin keeps within the
// vendor's window. The pressure parts' slow store fills its bucket for a
// few seconds at most (its wave's lanes coalesce); this one keeps the
// bucket busy for the whole slow stretch. It comes after the silence
// parts, so a seed draws every earlier part as it did before it.
func init() { catalogue = append(catalogue, slowParts...) }

var slowParts = []part{
	{"strict-slow-store", "config", func(b *build, r *rand.Rand) ([]string, string) {
		for _, c := range b.sc.Channels {
			if c.Connections > 1 {
				return nil, "a busy stretch fanned out to many connections a property asks more than the drain sends"
			}
		}
		c := b.channel(r)
		// One credential, so that every property's lane of a kind shares
		// a bucket, at a rate the properties' lanes can keep busy while
		// each push takes a second or more of slow store calls.
		c.Creds = 1
		c.Rate = oneOf(r, 2.0, 5.0)
		if float64(b.sc.Properties) < 2*c.Rate {
			c.Rate = 2
		}
		c.Burst = oneOf(r, 4, 10)
		// The documented default margin (100 ms), which the strict
		// check holds the fleet to.
		delete(c.Keys, "margin")
		c.Vendor.Strict = true
		from := time.Duration(r.IntN(int(b.sc.Load.Duration/time.Second)/2+1)) * time.Second
		span := oneOf(r, 30*time.Second, time.Minute, 2*time.Minute)
		f := &b.sc.Faults
		f.SlowStore, f.SlowShare = [2]time.Duration{from, from + span}, oneOf(r, 0.2, 0.5)
		f.SlowLatency = Latency{P50: 278 * time.Millisecond, P99: 480 * time.Millisecond}
		f.SlowCap = 1500 * time.Millisecond
		// Changes at three times the bucket's rate for each of the
		// channel's kinds, over every property.
		b.sc.Busy = &Busy{At: from, Over: span, PerSecond: 3 * c.Rate * float64(len(c.Kinds)), Kinds: c.Kinds}
		if s := valid(b); s != "" {
			return nil, s
		}
		return []string{fmt.Sprintf("strict_slow_store.limit=%g/%d", c.Rate, c.Burst), fmt.Sprintf("strict_slow_store.share=%g", f.SlowShare),
			"strict_slow_store.span=" + span.String()}, ""
	}},
}

// Busy is a stretch from At for Over in which the PMS sends PerSecond
// changes (a Poisson stream) to random properties' cells of Kinds, each
// of one to seven days within the first 60 of the horizon.
type Busy struct {
	At, Over  time.Duration
	PerSecond float64
	Kinds     []string
}

// busyStretch sends w.
func (s *sim) busyStretch(ctx context.Context, w Busy, r *rand.Rand) {
	if sleep(ctx, w.At) != nil {
		return
	}
	end := time.Now().Add(w.Over)
	l := s.sc.Load
	for ctx.Err() == nil && time.Now().Before(end) {
		if sleep(ctx, time.Duration(r.ExpFloat64()/w.PerSecond*float64(time.Second))) != nil {
			return
		}
		c := change{prop: int32(r.IntN(s.sc.Properties)), kind: indexOf(kindNames, oneOf(r, w.Kinds...)), room: r.IntN(l.Rooms),
			plan: r.IntN(l.Plans), days: 1 + r.IntN(7), value: int32(1 + r.IntN(500))}
		c.from = r.IntN(60 - c.days + 1)
		s.send(c)
	}
}
