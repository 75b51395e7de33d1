package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// hotelRef is the demo's id of a property at a channel (see connectionsJSON).
func hotelRef(channel, property string) string {
	n := strings.TrimPrefix(property, "hotel-")
	if channel == "booking_com" {
		return "BK-" + n
	}
	return "EX-" + n
}

// channelsFor lists the channels with an endpoint for kind: where a
// change of that kind fans out to.
func channelsFor(kind string) []string {
	var out []string
	for _, ch := range channels {
		for _, ep := range ch.endpoints {
			if ep == kind {
				out = append(out, ch.name)
			}
		}
	}
	return out
}

// reached is when the change c's date d (its day k at channel ch) first
// held c's values or a newer change's: by sequence for the json format,
// by values for the vendors' formats, which carry none.
func reached(o options, ch channel, copies map[string]*otacopy.Copy, tr *truth, c change, k otacopy.Day) (time.Time, bool) {
	day := k
	day.HotelRef = hotelRef(ch.name, k.HotelRef)
	if ch.formatOf(o) == "json" {
		return copies[ch.name].Reached(day, c.Sequence)
	}
	var first time.Time
	for _, h := range tr.history[k] {
		if h.seq < c.Sequence {
			continue
		}
		if at, ok := copies[ch.name].ReachedAfter(day, h.values, c.at); ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

func channelNamed(name string) channel {
	for _, ch := range channels {
		if ch.name == name {
			return ch
		}
	}
	return channel{name: name}
}

func report(out io.Writer, o options, lim gcra.Limit, otas map[string]*mockota.Server, t *tally, tr *truth, dead map[[2]string]bool, rs *resyncRun, elapsed time.Duration) error {
	fmt.Fprintf(out, "\npipelinedemo report (%d workers, %d events, %v)\n", o.workers, o.events, elapsed.Round(time.Second))
	fmt.Fprintf(out, "  %-26s %7s %12s %10s %8s %6s\n", "channel / endpoint", "pushes", "rate (req/s)", "quota", "of quota", "429s")
	requests, throttled, over := 0, 0, false
	copies := map[string]*otacopy.Copy{}
	for _, ch := range channels {
		srv := otas[ch.name]
		all := srv.Requests()
		for _, ep := range ch.meters() {
			times := srv.AcceptedTimes("token-TOKEN_"+strings.ToUpper(ch.name), ep)
			n429 := 0
			for _, r := range all {
				if r.Endpoint == ep {
					requests++
					if r.Status == 429 {
						n429++
					}
				}
			}
			throttled += n429
			rate := 0.0
			if len(times) > lim.Burst {
				rate = float64(len(times)-lim.Burst) / times[len(times)-1].Sub(times[0]).Seconds()
			}
			over = over || rate > lim.Rate*1.01
			fmt.Fprintf(out, "  %-26s %7d %12.2f %10g %7.0f%% %6d\n", ch.name+" / "+ep, len(times), rate, lim.Rate, 100*rate/lim.Rate, n429)
		}
		build := otacopy.Build
		if f := ch.formatOf(o); f != "json" {
			build = func(acc []mockota.Request) (*otacopy.Copy, error) { return otacopy.BuildWire(acc, f) }
		}
		c, err := build(srv.Accepted())
		if err != nil {
			return err
		}
		copies[ch.name] = c
	}

	tr.mu.Lock()
	defer tr.mu.Unlock()
	waiting := dirtyReport(out, o, lim, otas, copies, tr)
	fanned := 0
	var latencies []time.Duration
	byKind := map[string][]time.Duration{}
	missing, poisoned, poisonedDead, otherDead := 0, 0, 0, 0
	var slowest struct {
		lat time.Duration
		c   change
		ch  string
	}
	for _, c := range tr.changes {
		if c.RoomType == poisonRoom {
			// Refused by every vendor: it must be dead-lettered, never
			// reach the OTA.
			poisoned++
			if dead[[2]string{c.PropertyID, fmt.Sprint(c.Sequence)}] {
				poisonedDead++
			}
			continue
		}
		if dead[[2]string{c.PropertyID, fmt.Sprint(c.Sequence)}] {
			otherDead++
		}
		for _, ch := range channelsFor(c.Kind) {
			fanned++
			var last time.Time
			for _, d := range c.Dates() {
				at, ok := reached(o, channelNamed(ch), copies, tr, c, otacopy.Day{HotelRef: c.PropertyID, Kind: c.Kind, RoomType: c.RoomType, RatePlan: c.RatePlan, Date: d})
				if !ok {
					missing++
					last = time.Time{}
					break
				}
				if at.After(last) {
					last = at
				}
			}
			if !last.IsZero() {
				if l := last.Sub(c.at); slowest.lat < l {
					slowest.lat, slowest.c, slowest.ch = l, c, ch
				}
				latencies = append(latencies, last.Sub(c.at))
				byKind[c.Kind] = append(byKind[c.Kind], last.Sub(c.at))
			}
		}
	}
	lanes, stale, poisonedCells := map[string]bool{}, 0, 0
	for k, want := range tr.newest {
		if k.RoomType == poisonRoom {
			poisonedCells++
			continue
		}
		for _, ch := range channelsFor(k.Kind) {
			d := k
			d.HotelRef = hotelRef(ch, k.HotelRef)
			lanes[d.HotelRef+"#"+d.Kind] = true
			got, ok := copies[ch].Held(d)
			if !ok || got.Values != want.values || (channelNamed(ch).formatOf(o) == "json" && got.Sequence != want.seq) {
				stale++
			}
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	changes := len(tr.changes)
	fmt.Fprintf(out, "  changes %d, fanned out to %d (change, endpoint) pairs; OTA requests %d (%d items), 429s %d\n",
		changes, fanned, requests, t.items, throttled)
	fmt.Fprintf(out, "  OTA requests per change: %.2f (requests ÷ fanned-out changes); items per push %.1f\n",
		float64(requests)/float64(max(fanned, 1)), float64(t.items)/float64(max(t.pushes, 1)))
	fmt.Fprintf(out, "  poisoned %d, dead-lettered %d (%d refused-change dead letters, one per channel; other changes dead-lettered %d); extra requests spent on isolation %d; vendor warnings %d\n",
		poisoned, poisonedDead, t.refused, otherDead, t.isolation, t.warnings)
	if len(latencies) > 0 {
		sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
		fmt.Fprintf(out, "  change → OTA latency: p50 %v, p99 %v, max %v\n", pct(latencies, 0.50), pct(latencies, 0.99), latencies[len(latencies)-1].Round(time.Millisecond))
		if t.trace != nil {
			c := slowest.c
			fmt.Fprintf(out, "  the slowest: %s (%s %s %s/%s %s..%s, sequence %d) sent at %dms reached %s after %v\n", c.EventID, c.PropertyID, c.Kind,
				c.RoomType, c.RatePlan, c.From, c.To, c.Sequence, t.trace.since(c.at), slowest.ch, slowest.lat.Round(time.Millisecond))
		}
	}
	if o.stopsells > 0 {
		fmt.Fprintf(out, "  by kind:")
		for _, k := range []string{"availability", "rates"} {
			l := byKind[k]
			if len(l) == 0 {
				continue
			}
			sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
			name := k
			if k == "availability" {
				name = "stop-sells (availability, urgent)"
			}
			fmt.Fprintf(out, " %s p50 %v, p99 %v, max %v over %d;", name, pct(l, 0.5), pct(l, 0.99), l[len(l)-1].Round(time.Millisecond), len(l))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "  slots wasted %d (%.1f%% of pushes); lane jobs deferred %d times, nothing to push %d, shed %d, dead-lettered %d; messages left for redelivery %d, received again %d; lanes the sweeper took over %d\n",
		t.wasted, 100*float64(t.wasted)/float64(max(t.pushes, 1)), t.outcomes[dispatch.Deferred], t.outcomes[dispatch.Coalesced],
		t.outcomes[dispatch.Shed], t.outcomes[dispatch.DeadLettered], t.failed.Load(), t.receivedAgain.Load(), t.swept.Load())
	if len(t.lateness) > 0 {
		late := append([]time.Duration(nil), t.lateness...)
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		fmt.Fprintf(out, "  DeliveryLateness of deferred jobs (arrival − due): p50 %v, p99 %v, max %v over %d deliveries\n",
			pct(late, 0.5), pct(late, 0.99), late[len(late)-1].Round(time.Millisecond), len(late))
	}
	lc, sc := t.limiterCalls.Load(), t.stateCalls.Load()
	fmt.Fprintf(out, "  DynamoDB calls per change: %.2f (limiter %.2f, ARI state and lanes %.2f); per push: limiter %.2f, state %.2f\n",
		float64(lc+sc)/float64(max(changes, 1)), float64(lc)/float64(max(changes, 1)), float64(sc)/float64(max(changes, 1)),
		float64(lc)/float64(max(t.pushes, 1)), float64(sc)/float64(max(t.pushes, 1)))
	fmt.Fprintf(out, "  state writes by kind: %v; reads %d\n", t.ops, sc-int64(sum(t.ops)))
	if n := len(t.storeLatency); n > 0 {
		lat := append([]time.Duration(nil), t.storeLatency...)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		fmt.Fprintf(out, "  DynamoDB (emulator) latency per call: p50 %v, p99 %v; %d calls, %.0f per second of the run\n",
			pct(lat, 0.5), pct(lat, 0.99), n, float64(n)/elapsed.Seconds())
	}
	secondsReport(out, t.start, lim, otas, t, waiting)
	if rs != nil {
		resyncReport(out, o, lim, otas, copies, tr, t, *rs)
	}
	fmt.Fprintf(out, "  final check against the newest PMS values (read back with the independent decoders): lanes checked %d, stale %d (poisoned cells left out: %d), changes never reached %d\n", len(lanes), stale, poisonedCells, missing)
	switch {
	case poisonedDead != poisoned || otherDead > 0:
		return fmt.Errorf("%d poisoned changes, %d of them dead-lettered, and %d good changes dead-lettered; want every poisoned one and no other", poisoned, poisonedDead, otherDead)
	case over:
		return fmt.Errorf("an endpoint exceeded its quota")
	case stale > 0 || missing > 0:
		return fmt.Errorf("%d OTA dates are stale and %d (change, endpoint) pairs never arrived", stale, missing)
	}
	return nil
}

func pct(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(int(float64(len(sorted))*p), len(sorted)-1)].Round(time.Millisecond)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// dirtyReport prints, per endpoint, the share of its quota used while some
// change to it was waiting for the OTA: from each change's publication to
// its arrival (all its dates at that sequence or newer). Quiet periods do
// not count against it, so under a backlog it shows whether the quota was
// used in full.
func dirtyReport(out io.Writer, o options, lim gcra.Limit, otas map[string]*mockota.Server, copies map[string]*otacopy.Copy, tr *truth) (waiting map[string][][2]time.Time) {
	waiting = map[string][][2]time.Time{}
	fmt.Fprintf(out, "  quota used while the endpoint had changes waiting:")
	for _, ch := range channels {
		for _, ep := range ch.meters() {
			var spans [][2]time.Time
			for _, c := range tr.changes {
				if ch.meterOf(c.Kind) != ep || !slices.Contains(ch.endpoints, c.Kind) || c.RoomType == poisonRoom {
					continue
				}
				end := c.at
				for _, d := range c.Dates() {
					at, ok := reached(o, ch, copies, tr, c, otacopy.Day{HotelRef: c.PropertyID, Kind: c.Kind, RoomType: c.RoomType, RatePlan: c.RatePlan, Date: d})
					if ok && at.After(end) {
						end = at
					}
				}
				spans = append(spans, [2]time.Time{c.at, end})
			}
			waiting[ch.name+"/"+ep] = slices.Clone(spans)
			dirty, union := mergeSpans(spans)
			pushes := 0
			for _, at := range otas[ch.name].AcceptedTimes("token-TOKEN_"+strings.ToUpper(ch.name), ep) {
				for _, u := range union {
					if !at.Before(u[0]) && !at.After(u[1]) {
						pushes++
						break
					}
				}
			}
			share := 0.0
			if dirty > 0 {
				share = 100 * float64(pushes) / (lim.Rate * dirty.Seconds())
			}
			fmt.Fprintf(out, " %s/%s %.0f%% (%d in %.1fs);", ch.name, ep, share, pushes, dirty.Seconds())
		}
	}
	fmt.Fprintln(out)
	return waiting
}

// secondsReport prints, for each second of the run, the DynamoDB calls
// answered and their median latency, and per endpoint the requests the
// OTA accepted against its quota and the changes waiting for it at the
// second's end (published, not yet at the OTA): where the quota went
// unused while changes waited, and what they waited for.
func secondsReport(out io.Writer, start time.Time, lim gcra.Limit, otas map[string]*mockota.Server, t *tally, waiting map[string][][2]time.Time) {
	var eps []string
	for _, ch := range channels {
		for _, ep := range ch.meters() {
			eps = append(eps, ch.name+"/"+ep)
		}
	}
	last := 0
	for _, spans := range waiting {
		for _, s := range spans {
			last = max(last, int(s[1].Sub(start)/time.Second))
		}
	}
	calls := make([][]time.Duration, last+1)
	for i, at := range t.storeAt { // report holds t.mu
		if sec := int(at.Sub(start) / time.Second); sec >= 0 && sec <= last {
			calls[sec] = append(calls[sec], t.storeLatency[i])
		}
	}
	fmt.Fprintf(out, "  by second: DynamoDB calls answered (p50 latency) | per endpoint, requests accepted of %g, and changes waiting at the second's end:\n", lim.Rate)
	fmt.Fprintf(out, "    %4s %14s |", "s", "DynamoDB")
	for _, ep := range eps {
		fmt.Fprintf(out, " %26s", ep)
	}
	fmt.Fprintln(out)
	for sec := 0; sec <= last; sec++ {
		from, to := start.Add(time.Duration(sec)*time.Second), start.Add(time.Duration(sec+1)*time.Second)
		p50 := time.Duration(0)
		if l := calls[sec]; len(l) > 0 {
			sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
			p50 = pct(l, 0.5)
		}
		fmt.Fprintf(out, "    %4d %4d (%5dms) |", sec, len(calls[sec]), p50.Milliseconds())
		for _, ep := range eps {
			ch, meter, _ := strings.Cut(ep, "/")
			pushes := 0
			for _, at := range otas[ch].AcceptedTimes("token-TOKEN_"+strings.ToUpper(ch), meter) {
				if !at.Before(from) && at.Before(to) {
					pushes++
				}
			}
			waits := 0
			for _, s := range waiting[ep] {
				if s[0].Before(to) && s[1].After(to) {
					waits++
				}
			}
			fmt.Fprintf(out, " %26s", fmt.Sprintf("%d, %d waiting", pushes, waits))
		}
		fmt.Fprintln(out)
	}
}

// mergeSpans unions time spans, returning their total length and the union.
func mergeSpans(spans [][2]time.Time) (time.Duration, [][2]time.Time) {
	sort.Slice(spans, func(i, j int) bool { return spans[i][0].Before(spans[j][0]) })
	var union [][2]time.Time
	for _, s := range spans {
		if n := len(union); n > 0 && !s[0].After(union[n-1][1]) {
			if s[1].After(union[n-1][1]) {
				union[n-1][1] = s[1]
			}
			continue
		}
		union = append(union, s)
	}
	total := time.Duration(0)
	for _, u := range union {
		total += u[1].Sub(u[0])
	}
	return total, union
}
