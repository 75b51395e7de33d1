package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
)

// Onboard is hotels connected at once: the first Properties of the fleet,
// whose state the store holds (Days days from day0 of Rooms × Plans
// cells, every kind) and no OTA does, each sent a resync event at At.
type Onboard struct {
	Properties   int
	Rooms, Plans int
	Days         int
	At           time.Duration
	// Whole resyncs each hotel's whole connections, as `fleetbucket
	// resync <property>` does: the event names no cells, and the worker
	// reads those the connections map (they map every room type and rate
	// plan the run uses to itself), each kind by its format's key.
	// Otherwise the event names the seeded cells.
	Whole bool
}

// mapsCodes reports whether property p's connections map its codes: an
// onboarding hotel resynced whole.
func (o *Onboard) mapsCodes(p int) bool { return o != nil && o.Whole && p < o.Properties }

// BulkStats are the bulk class's jobs as their results tell them (a bulk
// job's id names its owner token, which starts "b-").
type BulkStats struct {
	Jobs, Pushes, Items int
	Outcomes            map[dispatch.Outcome]int
	// Buckets holds, per bucket, the bulk pushes and when the last went.
	Buckets map[string]*bulkBucket
}

type bulkBucket struct {
	Pushes int
	Last   time.Duration
	// At is when each bulk push's job ended, in order.
	At []time.Duration
}

// countBulk adds a job's result to the bulk stats if it is a bulk job's,
// under s.mu.
func (s *sim) countBulk(j dispatch.Result) {
	if !strings.Contains(j.JobID, "@b-") {
		return
	}
	b := &s.stats.Bulk
	if b.Outcomes == nil {
		b.Outcomes, b.Buckets = map[dispatch.Outcome]int{}, map[string]*bulkBucket{}
	}
	b.Jobs++
	b.Outcomes[j.Outcome]++
	b.Pushes += j.Pushes
	b.Items += j.Items
	if j.Pushes > 0 {
		bk := b.Buckets[j.Bucket]
		if bk == nil {
			bk = &bulkBucket{}
			b.Buckets[j.Bucket] = bk
		}
		bk.Pushes += j.Pushes
		bk.Last = time.Since(s.start)
		for range j.Pushes {
			bk.At = append(bk.At, bk.Last)
		}
	}
}

// seedOnboard writes the onboarding hotels' state into the state table,
// as their PMS's history would have, and into the ledger as state no OTA
// holds. It is the hotels' past, not the run's: the writes take no
// simulated time and are billed to no one. Each cell's year is stored as
// the month items Apply would leave (ari.MonthItems, seed.go), not
// applied: at 500 hotels, 360,000 parsed update expressions did not end in
// 25 min.
func (s *sim) seedOnboard(ctx context.Context, o Onboard) error {
	return s.onboardHistory(o, func(ch ari.Change, k rowKey, value int32) error {
		if err := s.db.seedState("state", ch); err != nil {
			return err
		}
		s.ledger.Seed(k, 0, o.Days, int32(ch.Sequence), value)
		return nil
	})
}

// onboardHistory hands put each onboarding cell's stored history, one
// change a cell over o.Days from day0, with its ledger row and value.
func (s *sim) onboardHistory(o Onboard, put func(ch ari.Change, k rowKey, value int32) error) error {
	r := rand.New(rand.NewPCG(s.sc.Seed, 0x0b0a))
	for p := range o.Properties {
		for kind := range kindNames {
			for room := range o.Rooms {
				for plan := range o.Plans {
					c := change{prop: int32(p), kind: kind, room: room, plan: plan, from: 0, days: o.Days, value: int32(1 + r.IntN(500))}
					if plan > 0 && !hasPlan(&s.sc, kind) {
						continue // the room type's one cell, seeded at plan 0
					}
					// The values first: they decide the cell (availability
					// is the room type's where a channel speaks XML), as
					// they do for a live change (send).
					values := s.changeValues(&c)
					s.seq[c.prop]++
					seq := s.seq[c.prop]
					from := day0
					ch := ari.Change{EventID: fmt.Sprintf("seed-%d-%d", p, seq), PropertyID: propID(p), Sequence: seq, Kind: kindNames[kind],
						RoomType: roomNames[room], RatePlan: planName(c.plan), From: from.Format(ari.DateLayout),
						To: from.AddDate(0, 0, o.Days-1).Format(ari.DateLayout), Values: values}
					if err := put(ch, rowKey{prop: c.prop, kind: uint8(kind), room: uint8(room), plan: uint8(plan)}, c.value); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// resyncOnboard sends every onboarding hotel's resync event to the
// changes queue at o.At, as `fleetbucket resync` or a connection enabled
// would.
func (s *sim) resyncOnboard(ctx context.Context, o Onboard) {
	if sleep(ctx, o.At) != nil {
		return
	}
	for p := range o.Properties {
		if o.Whole {
			r := ari.Resync{ResyncID: "onboard-" + propID(p), PropertyID: propID(p), From: day0.Format(ari.DateLayout),
				To: day0.AddDate(0, 0, o.Days-1).Format(ari.DateLayout)}
			body, err := r.Event(time.Now())
			if err != nil {
				panic(err)
			}
			s.sqs.Put(s.changes, body)
			continue
		}
		// Where availability is the room type's (its cells have no rate
		// plan), one event a kind: a resync's cells are every kind's.
		kinds := [][]int{{0, 1, 2}}
		if !hasPlan(&s.sc, 0) {
			kinds = [][]int{{0}, {1, 2}}
		}
		for _, ks := range kinds {
			var cells []ari.ResyncCell
			for room := range o.Rooms {
				for plan := range o.Plans {
					switch {
					case hasPlan(&s.sc, ks[0]):
						cells = append(cells, ari.ResyncCell{RoomType: roomNames[room], RatePlan: planName(plan)})
					case plan == 0:
						cells = append(cells, ari.ResyncCell{RoomType: roomNames[room]})
					}
				}
			}
			r := ari.Resync{ResyncID: "onboard-" + propID(p), PropertyID: propID(p), From: day0.Format(ari.DateLayout),
				To: day0.AddDate(0, 0, o.Days-1).Format(ari.DateLayout), Cells: cells}
			if len(kinds) > 1 {
				r.ResyncID += "-" + kindNames[ks[0]]
				for _, k := range ks {
					r.Kinds = append(r.Kinds, kindNames[k])
				}
			}
			body, err := r.Event(time.Now())
			if err != nil {
				panic(err)
			}
			s.sqs.Put(s.changes, body)
		}
	}
}

// hasPlan says whether a cell of kind has a rate plan in sc: not
// availability where a channel speaks an XML format (changeValues).
func hasPlan(sc *Scenario, kind int) bool {
	return !(sc.xmlScenario() && kindNames[kind] == "availability")
}

// writeOnboard writes the onboarding's figures: the resync's delivery,
// the bulk class's pushes and its drain against the quota live pushes
// leave on the buckets it used.
func (r *Report) writeOnboard(w io.Writer) {
	o := r.Scenario.Onboard
	if o == nil {
		return
	}
	b := r.Stats.Bulk
	h := &r.OnboardFresh
	since := func(d time.Duration) time.Duration { return max(d-o.At, 0) }
	fmt.Fprintf(w, "  onboarding: %d hotels resynced from %v: %d (day, channel) deliveries, from the resync p50 %v, p99 %v; last hotel in sync %v after the resync began\n",
		o.Properties, o.At, h.N(), ms(since(h.Quantile(0.5))), ms(since(h.Quantile(0.99))), ms(since(r.OnboardLast)))
	outs, _ := json.Marshal(b.Outcomes)
	fmt.Fprintf(w, "    bulk jobs %d (outcomes %s), pushes %d (%.1f items each), %.2f bulk jobs per bulk push\n",
		b.Jobs, outs, b.Pushes, per(float64(b.Items), float64(b.Pushes)), per(float64(b.Jobs), float64(b.Pushes)))
	// Drain: per bucket, bulk pushes over the span from the resync to its
	// last bulk push, against what the bucket's rate leaves of live pushes
	// (live pushes over the whole run, spread evenly over every bucket).
	var ratio, middle []float64
	var first []time.Duration
	live := float64(r.Stats.Pushes - b.Pushes)
	buckets := 0
	for _, c := range r.Scenario.Channels {
		buckets += c.Creds * len(c.Kinds)
	}
	liveRate := per(live, float64(buckets)*r.Stats.EndedAt.Seconds())
	rate := 0.0
	if len(r.Scenario.Channels) > 0 {
		rate = r.Scenario.Channels[0].Rate
	}
	for _, bk := range b.Buckets {
		span := (bk.Last - o.At).Seconds()
		if span <= 0 || rate <= liveRate {
			continue
		}
		ratio = append(ratio, float64(bk.Pushes)/span/(rate-liveRate))
		// Apart: how long the resync took to reach the bucket, and the
		// drain while every lane still had bulk work, between the
		// bucket's 10th and 90th percentile bulk push (the ramp as the
		// resync events are planned, and the tail, where the last lanes
		// push one at a time, left out).
		first = append(first, bk.At[0]-o.At)
		lo, hi := len(bk.At)/10, len(bk.At)*9/10
		if d := (bk.At[hi] - bk.At[lo]).Seconds(); hi > lo && d > 0 {
			middle = append(middle, float64(hi-lo)/d/(rate-liveRate))
		}
	}
	slices.Sort(ratio)
	slices.Sort(middle)
	slices.Sort(first)
	if n := len(ratio); n > 0 {
		fmt.Fprintf(w, "    bulk drain ÷ quota live traffic leaves (%.1f − %.2f live pushes/s a bucket), over %d buckets: min %.0f%%, median %.0f%%, max %.0f%%\n",
			rate, liveRate, n, 100*ratio[0], 100*ratio[n/2], 100*ratio[n-1])
		fmt.Fprintf(w, "      first bulk push after the resync: median %v (max %v)", ms(first[n/2]), ms(first[n-1]))
		if m := len(middle); m > 0 {
			fmt.Fprintf(w, "; between a bucket's 10th and 90th percentile bulk push: min %.0f%%, median %.0f%%, max %.0f%%", 100*middle[0], 100*middle[m/2], 100*middle[m-1])
		}
		fmt.Fprintln(w)
	}
	drainLossOf(r.Arrivals, o.At, rate).write(w)
}
