package sim

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// The adversary draws whole cases from a seed: a small fleet, a config
// from the documented space, a vendor per channel from a catalogue, faults
// and a load, then runs them under every invariant Run checks. A case is
// a base (the fleet, its channels' limits, the PMS's steady load) plus a
// list of parts, each one config key, vendor behaviour, fault or load that
// it adds. Every part draws its values from its own stream, seeded by the
// case's seed and the part's name, so a case without one of its parts
// draws the rest exactly as before: that is what lets Shrink drop parts one
// at a time while the failure stays.

// Case is one adversary draw: a seed and the parts it carries.
type Case struct {
	Seed  uint64
	Parts []string
}

// part is one thing a case may add. apply changes the scenario being
// built, drawing from r (its own stream); it returns the facets it set
// ("key=value", for the coverage table), or a reason it does not apply to
// this base.
type part struct {
	name  string
	kind  string // config, vendor, fault, load
	apply func(b *build, r *rand.Rand) (facets []string, skip string)
}

// build is a scenario being drawn.
type build struct {
	sc Scenario
	// pick is the channel a config or vendor part applies to, drawn from
	// the part's own stream.
	facets []string
}

func (b *build) channel(r *rand.Rand) *ChannelSpec { return &b.sc.Channels[r.IntN(len(b.sc.Channels))] }

// channelIf is one of the channels ok accepts, drawn as channel draws
// where it accepts them all; nil if it accepts none.
func channelIf(b *build, r *rand.Rand, ok func(*ChannelSpec) bool) *ChannelSpec {
	var all []int
	for i := range b.sc.Channels {
		if ok(&b.sc.Channels[i]) {
			all = append(all, i)
		}
	}
	if len(all) == 0 {
		return nil
	}
	return &b.sc.Channels[all[r.IntN(len(all))]]
}

// refusesNoItem reports whether c's vendor takes every room it is sent.
func refusesNoItem(c *ChannelSpec) bool { return c.Vendor.Wire == nil || c.Vendor.Wire.Unmapped == nil }

func setKey(c *ChannelSpec, k, v string) {
	if c.Keys == nil {
		c.Keys = map[string]string{}
	}
	c.Keys[k] = v
}

func setKindKey(c *ChannelSpec, kind, k, v string) {
	if c.KindKeys == nil {
		c.KindKeys = map[string]map[string]string{}
	}
	if c.KindKeys[kind] == nil {
		c.KindKeys[kind] = map[string]string{}
	}
	c.KindKeys[kind][k] = v
}

func oneOf[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

// catalogue is every part the adversary draws, in the order it applies
// them. A config part that makes the config invalid (config.Parse refuses
// it beside what came before) is skipped: every case is a config
// `config validate` accepts.
var catalogue = []part{
	// ---- config: the keys of docs/configuration.md ----
	{"margin", "config", func(b *build, r *rand.Rand) ([]string, string) {
		v := oneOf(r, "0s", "50ms", "500ms", "2s")
		setKey(b.channel(r), "margin", fmt.Sprintf("%q", v))
		return []string{"margin=" + v}, ""
	}},
	{"shards", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		n := 2 + r.IntN(3)
		c.Burst = max(c.Burst, n)
		setKey(c, "shards", fmt.Sprint(n))
		return []string{fmt.Sprintf("shards=%d", n)}, ""
	}},
	{"adaptive", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		v := oneOf(r, `{}`, `{"quiet_seconds": 5}`)
		setKey(c, "adaptive", v)
		return []string{"adaptive=" + v}, ""
	}},
	{"items", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		w := oneOf(r, 0.5, 1.0, 2.0)
		maxItems := oneOf(r, 31, 62, 200)
		// A slow rate lets lanes gather more days than one message holds.
		c.Rate, c.Burst = oneOf(r, 5.0, 20.0, 60.0), oneOf(r, 62, 124, 400)
		setKey(c, "cost", `"items"`)
		setKey(c, "item_weight", fmt.Sprint(w))
		setKey(c, "max_items", fmt.Sprint(maxItems))
		c.Vendor.Items, c.Vendor.ItemWeight = true, w
		return []string{"cost=items", fmt.Sprintf("item_weight=%g", w), fmt.Sprintf("max_items=%d", maxItems)}, ""
	}},
	{"max_in_flight", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		n := 1 + r.IntN(3)
		hold := oneOf(r, "25s", "60s", "15m")
		setKey(c, "max_in_flight", fmt.Sprint(n))
		setKey(c, "lease_hold", fmt.Sprintf("%q", hold))
		c.Vendor.MaxInFlight = n
		return []string{fmt.Sprintf("max_in_flight=%d", n), "lease_hold=" + hold}, ""
	}},
	{"quota", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		// Enough for every lane of a bucket in one period, so that the
		// fleet drains within two: a quota smaller than the lanes it
		// must serve leaves them behind for days, not lost.
		q := &VendorQuota{Count: oneOf(r, 30, 60, 200), Period: oneOf(r, "hour", "hour", "day"),
			Zone: oneOf(r, "", "Europe/Amsterdam", "America/New_York", "Asia/Kolkata", "Pacific/Chatham")}
		setKey(c, "quota", fmt.Sprintf(`{"count": %d, "period": %q, "time_zone": %q}`, q.Count, q.Period, q.Zone))
		c.Vendor.Quota = q
		// The run drains until the period after the load's ends.
		_, end := quotaPeriod(q, epoch.Add(b.sc.Load.Duration))
		_, next := quotaPeriod(q, end)
		b.sc.Drain = max(b.sc.Drain, next.Sub(epoch)+10*time.Minute)
		return []string{fmt.Sprintf("quota.count=%d", q.Count), "quota.period=" + q.Period, "quota.time_zone=" + q.Zone}, ""
	}},
	{"urgent", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		if !slices.Contains(c.Kinds, "availability") || !slices.Contains(c.Kinds, "rates") {
			return nil, "the channel has no availability and rates endpoints to share a meter"
		}
		c.Burst = max(c.Burst, 4)
		res := 1 + r.IntN(c.Burst/2)
		for _, k := range []string{"availability", "rates"} {
			setKindKey(c, k, "meter", `"ari"`)
			setKindKey(c, k, "urgent_reserve", fmt.Sprint(res))
		}
		setKindKey(c, "availability", "priority", `"urgent"`)
		if c.Vendor.Meters == nil {
			c.Vendor.Meters = map[string]string{}
		}
		c.Vendor.Meters["availability"], c.Vendor.Meters["rates"] = "ari", "ari"
		return []string{"priority=urgent", fmt.Sprintf("urgent_reserve=%d", res), "meter=ari"}, ""
	}},
	{"meter", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		if !slices.Contains(c.Kinds, "rates") || !slices.Contains(c.Kinds, "restrictions") {
			return nil, "the channel has no rates and restrictions endpoints to share a meter"
		}
		for _, k := range []string{"rates", "restrictions"} {
			setKindKey(c, k, "meter", `"prices"`)
		}
		if c.Vendor.Meters == nil {
			c.Vendor.Meters = map[string]string{}
		}
		c.Vendor.Meters["rates"], c.Vendor.Meters["restrictions"] = "prices", "prices"
		return []string{"meter=prices"}, ""
	}},
	{"fill_quota", "config", func(b *build, r *rand.Rand) ([]string, string) {
		setKey(b.channel(r), "fill_quota", "true")
		return []string{"fill_quota=true"}, ""
	}},
	{"limits", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		// A tighter window over the minute: half the rate, twice the burst.
		perMinute := max(math.Floor(c.Rate*30), 1)
		burst := 2 * c.Burst
		setKey(c, "limits", fmt.Sprintf(`[{"per_minute": %g, "burst": %d}]`, perMinute, burst))
		c.Vendor.Windows = append(c.Vendor.Windows, window.Limit{Rate: perMinute / 60, Burst: burst})
		return []string{fmt.Sprintf("limits.per_minute=%g", perMinute)}, ""
	}},
	{"property_share", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		setKey(c, "property_share", fmt.Sprintf(`{"rate": %g, "burst": %d}`, c.Rate/2, max(c.Burst/2, 1)))
		return []string{"property_share=half"}, ""
	}},
	{"shadow", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		setKey(c, "mode", `"shadow"`)
		c.Vendor.Unchecked = true
		return []string{"mode=shadow"}, ""
	}},
	{"local-share", "config", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		setKey(c, "on_store_unavailable", `"local-share"`)
		c.Vendor.LocalShare = true
		return []string{"on_store_unavailable=local-share"}, ""
	}},
	{"max_bytes", "config", func(b *build, r *rand.Rand) ([]string, string) {
		n := oneOf(r, 1024, 2048, 8192)
		setKey(b.channel(r), "max_bytes", fmt.Sprint(n))
		return []string{fmt.Sprintf("max_bytes=%d", n)}, ""
	}},
	{"split_by", "config", func(b *build, r *rand.Rand) ([]string, string) {
		v := oneOf(r, "month", "none")
		setKey(b.channel(r), "split_by", fmt.Sprintf("%q", v))
		return []string{"split_by=" + v}, ""
	}},
	{"kinds_per_message", "config", func(b *build, r *rand.Rand) ([]string, string) {
		n := 1 + r.IntN(3)
		setKey(b.channel(r), "kinds_per_message", fmt.Sprint(n))
		return []string{fmt.Sprintf("kinds_per_message=%d", n)}, ""
	}},
	{"lifetime", "config", func(b *build, r *rand.Rand) ([]string, string) {
		// The range's far ends: a case's run is minutes long, so a job
		// that expired in it would be a lost change, not a config's.
		age, defs := oneOf(r, "1h", "336h"), oneOf(r, 1000, 100000)
		c := b.channel(r)
		setKey(c, "max_age", fmt.Sprintf("%q", age))
		setKey(c, "max_deferrals", fmt.Sprint(defs))
		return []string{"max_age=" + age, fmt.Sprintf("max_deferrals=%d", defs)}, ""
	}},
	{"throttle", "config", func(b *build, r *rand.Rand) ([]string, string) {
		v := oneOf(r, `{"statuses": [429, 503]}`, `{"headers": [{"preset": "ietf"}], "low_remaining": 2}`,
			`{"headers": [{"preset": "x-ratelimit"}], "low_percent": 10}`)
		setKey(b.channel(r), "throttle", v)
		return []string{"throttle=" + v}, ""
	}},
	{"push_timeout", "config", func(b *build, r *rand.Rand) ([]string, string) {
		v := oneOf(r, "2s", "5s", "45s")
		b.sc.Top["push_timeout"] = fmt.Sprintf("%q", v)
		return []string{"push_timeout=" + v}, ""
	}},
	{"linger", "config", func(b *build, r *rand.Rand) ([]string, string) {
		mode, d := oneOf(r, "course", "yield"), oneOf(r, "0s", "1s", "3s")
		b.sc.Linger = mode
		b.sc.Top["linger"] = fmt.Sprintf("%q", d)
		return []string{"linger=" + d, "linger.mode=" + mode}, ""
	}},

	// ---- vendors ----
	{"retry-after", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		v := oneOf(r, "date", "huge", "none")
		b.channel(r).Vendor.RetryAfter = v
		if v == "huge" {
			// Each 429 then silences its bucket for the client's 15-minute
			// cap, and a bucket with no margin to spare (burst 1) draws
			// 429s from its requests' jitter by design (docs/design.md,
			// the margin): the fleet may need a silence per few pushes of
			// its backlog. The case ends once every silence it met could
			// have ended.
			b.sc.Drain = max(b.sc.Drain, 4*time.Hour)
		}
		return []string{"vendor.retry_after=" + v}, ""
	}},
	{"ratelimit-fields", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		v := oneOf(r, "draft11", "malformed", "reduced")
		b.channel(r).Vendor.RateLimitHeaders = v
		return []string{"vendor.ratelimit=" + v}, ""
	}},
	{"vendor-in-flight", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		n := 1 + r.IntN(3)
		b.channel(r).Vendor.InFlight = n
		return []string{fmt.Sprintf("vendor.in_flight=%d", n)}, ""
	}},
	{"unauthorized", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		from := time.Duration(r.IntN(int(b.sc.Load.Duration/time.Second))) * time.Second
		b.channel(r).Vendor.Unauthorized = [2]time.Duration{from, from + oneOf(r, 10*time.Second, 2*time.Minute)}
		return []string{"vendor.401_after_rotation"}, ""
	}},
	{"slow", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		b.channel(r).Vendor.Slow = true
		return []string{"vendor.slow"}, ""
	}},
	{"hang", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		p := oneOf(r, 0.01, 0.05)
		b.channel(r).Vendor.Hang = p
		return []string{fmt.Sprintf("vendor.hang=%g", p)}, ""
	}},
	{"big-answers", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		p := oneOf(r, 0.05, 0.3)
		b.channel(r).Vendor.BigAnswers = p
		return []string{fmt.Sprintf("vendor.big_answers=%g", p)}, ""
	}},
	{"5xx", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		ch := r.IntN(len(b.sc.Channels))
		from := time.Duration(r.IntN(int(b.sc.Load.Duration/time.Second))) * time.Second
		b.sc.Faults.Vendor5xx, b.sc.Faults.Vendor5xxChannel = [2]time.Duration{from, from + oneOf(r, 10*time.Second, time.Minute)}, ch
		return []string{"vendor.5xx"}, ""
	}},
	{"halving", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		ch := r.IntN(len(b.sc.Channels))
		b.sc.Faults.HalveAt, b.sc.Faults.HalveChannel = time.Duration(1+r.IntN(int(b.sc.Load.Duration/time.Second)))*time.Second, ch
		return []string{"vendor.halving"}, ""
	}},

	// ---- faults ----
	{"db-outage", "fault", func(b *build, r *rand.Rand) ([]string, string) {
		from := time.Duration(r.IntN(int(b.sc.Load.Duration/time.Second))) * time.Second
		b.sc.Faults.DBOutage = [2]time.Duration{from, from + oneOf(r, 5*time.Second, 30*time.Second, 2*time.Minute)}
		return []string{"fault.db_outage"}, ""
	}},
	{"lost-answers", "fault", func(b *build, r *rand.Rand) ([]string, string) {
		b.sc.Faults.LostAnswers = oneOf(r, 0.01, 0.05)
		return []string{"fault.lost_answers"}, ""
	}},
	{"lambda-deaths", "fault", func(b *build, r *rand.Rand) ([]string, string) {
		b.sc.Faults.LambdaDeath = oneOf(r, 0.01, 0.05)
		return []string{"fault.lambda_deaths"}, ""
	}},
	{"duplicates", "fault", func(b *build, r *rand.Rand) ([]string, string) {
		b.sc.Faults.Duplicates = oneOf(r, 0.01, 0.05)
		return []string{"fault.sqs_duplicates"}, ""
	}},
	{"late-deliveries", "fault", func(b *build, r *rand.Rand) ([]string, string) {
		b.sc.Faults.LateDeliveries = oneOf(r, 0.1, 0.5)
		return []string{"fault.late_deliveries"}, ""
	}},
	{"clock-skew", "fault", func(b *build, r *rand.Rand) ([]string, string) {
		b.sc.Faults.ClockSkew = oneOf(r, 5*time.Millisecond, 50*time.Millisecond)
		return []string{"fault.clock_skew"}, ""
	}},

	// ---- loads ----
	{"storm", "load", func(b *build, r *rand.Rand) ([]string, string) {
		n := min(b.sc.Properties, 1+r.IntN(4))
		b.sc.Burst = &Burst{At: 10 * time.Second, Over: 20 * time.Second, Properties: n, RangeDays: 31, Ranges: 2,
			Rooms: b.sc.Load.Rooms, Plans: b.sc.Load.Plans, StopSellsPerSecond: 0.5}
		return []string{"load.storm"}, ""
	}},
	{"hot-property", "load", func(b *build, r *rand.Rand) ([]string, string) {
		b.sc.HotProperty = oneOf(r, 0.3, 0.7)
		return []string{"load.hot_property"}, ""
	}},
	{"many-connections", "load", func(b *build, r *rand.Rand) ([]string, string) {
		c := b.channel(r)
		c.Connections = oneOf(r, 8, 50, 64)
		b.sc.Properties = min(b.sc.Properties, 3)
		b.sc.Load.Rate = func(time.Duration) float64 { return 0.5 }
		// Every change fans out to each connection: a storm, or pushes
		// split into kilobyte messages, would ask the channel for more
		// than its quota can send in the drain, which proves nothing
		// lost. The channel keeps its own limits.
		b.sc.Burst = nil
		delete(c.Keys, "max_bytes")
		return []string{fmt.Sprintf("load.connections=%d", c.Connections)}, ""
	}},
}

// epoch is where every synctest bubble's clock starts.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func partNamed(name string) (part, bool) {
	for _, p := range catalogue {
		if p.name == name {
			return p, true
		}
	}
	return part{}, false
}

// stream is the random source of one name within a case.
func stream(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// DrawCase is the case of seed: each part of the catalogue with a chance
// of one in four.
func DrawCase(seed uint64) Case {
	r := stream(seed, "parts")
	c := Case{Seed: seed}
	for _, p := range catalogue {
		if r.Float64() < 0.25 {
			c.Parts = append(c.Parts, p.name)
		}
	}
	return c
}

// base is the case's fleet before its parts: a few dozen properties on one
// to three channels, a steady load of a minute or two.
func base(seed uint64) Scenario {
	r := stream(seed, "base")
	sc := Scenario{Name: "adversary", Seed: seed, Properties: 4 + r.IntN(24), CheckItems: true,
		Load: Load{Duration: time.Duration(45+r.IntN(60)) * time.Second, Kinds: [3]float64{1, 1, 1},
			MaxDays: 1 + r.IntN(14), WithinDays: 40 + r.IntN(80), Rooms: 1 + r.IntN(4), Plans: 1 + r.IntN(2)},
		Drain: time.Hour, SweepEvery: 5 * time.Minute, MemoryGB: 0.25, FinalSweep: true,
		Top: map[string]string{"max_range_days": "31"}}
	rate := 0.5 + 6*r.Float64()
	sc.Load.Rate = func(time.Duration) float64 { return rate }
	awsLatencies(&sc)
	kinds := [][]string{allKinds(), {"availability", "rates"}, {"rates"}, {"availability", "restrictions"}}
	for i := range 1 + r.IntN(3) {
		sc.Channels = append(sc.Channels, ChannelSpec{Name: fiveChannels[i], Kinds: oneOf(r, kinds...), Creds: 1 + r.IntN(3),
			Rate: oneOf(r, 0.5, 1, 2, 5, 10, 20), Burst: oneOf(r, 1, 2, 4, 8, 20, 40)})
	}
	return sc
}

// Build is the case's scenario, the facets its parts set and the parts it
// skipped with why.
func (c Case) Build() (Scenario, []string, []string, error) {
	b := &build{sc: base(c.Seed)}
	var skipped []string
	for _, p := range catalogue {
		if !slices.Contains(c.Parts, p.name) {
			continue
		}
		before := cloneScenario(b.sc)
		facets, skip := p.apply(b, stream(c.Seed, p.name))
		if skip == "" && p.kind == "config" {
			if _, err := config.Parse([]byte(connections(b.sc))); err != nil {
				skip = firstLine(err.Error())
			}
		}
		if skip != "" {
			b.sc = before
			skipped = append(skipped, p.name+": "+skip)
			continue
		}
		b.facets = append(b.facets, facets...)
	}
	if _, err := config.Parse([]byte(connections(b.sc))); err != nil {
		return b.sc, nil, nil, fmt.Errorf("case %s: the base config is invalid: %w", c, err)
	}
	quotaDrain(&b.sc)
	silenceDrain(&b.sc)
	b.sc.Note = "adversary case " + c.String() + describe(b.sc)
	return b.sc, b.facets, skipped, nil
}

// String is the case as scripts/sim.sh takes it back.
func (c Case) String() string {
	parts := "none"
	if len(c.Parts) > 0 {
		parts = strings.Join(c.Parts, ",")
	}
	return fmt.Sprintf("-seed %d -parts %s", c.Seed, parts)
}

// Replay is the command that runs the case again.
func (c Case) Replay() string { return "scripts/sim.sh adversary " + c.String() }

// ParseParts reads -parts' list ("none" for no part).
func ParseParts(s string) ([]string, error) {
	if s == "none" || s == "" {
		return nil, nil
	}
	var out []string
	for _, n := range strings.Split(s, ",") {
		if _, ok := partNamed(n); !ok {
			return nil, fmt.Errorf("no adversary part %q", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// Shrink drops the case's parts one at a time, keeping each drop while
// fails still holds, and returns the smallest case found.
func Shrink(c Case, fails func(Case) bool) Case {
	for i := 0; i < len(c.Parts); {
		smaller := Case{Seed: c.Seed, Parts: slices.Delete(slices.Clone(c.Parts), i, i+1)}
		if fails(smaller) {
			c = smaller
			continue
		}
		i++
	}
	return c
}

func cloneScenario(sc Scenario) Scenario {
	out := sc
	out.Channels = make([]ChannelSpec, len(sc.Channels))
	for i, c := range sc.Channels {
		c.Keys = cloneMap(c.Keys)
		if c.KindKeys != nil {
			kk := map[string]map[string]string{}
			for k, m := range c.KindKeys {
				kk[k] = cloneMap(m)
			}
			c.KindKeys = kk
		}
		c.Vendor.Meters = cloneMap(c.Vendor.Meters)
		c.Vendor.Windows = slices.Clone(c.Vendor.Windows)
		out.Channels[i] = c
	}
	out.Top = cloneMap(sc.Top)
	out.Bulks = slices.Clone(sc.Bulks)
	out.ConnEvents = slices.Clone(sc.ConnEvents)
	if sc.Reprice != nil {
		w := *sc.Reprice
		out.Reprice = &w
	}
	if sc.Burst != nil {
		b := *sc.Burst
		out.Burst = &b
	}
	return out
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func firstLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 1 {
		return strings.TrimSpace(lines[1])
	}
	return lines[0]
}

// describe lists what the case set on each channel, for the report.
func describe(sc Scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "; %d properties, %.1f changes/s for %v", sc.Properties, sc.Load.Rate(0), sc.Load.Duration)
	if sc.Deployment > 0 {
		fmt.Fprintf(&b, "; the release with shares deployed at %v", sc.Deployment)
	}
	for _, c := range sc.Channels {
		fmt.Fprintf(&b, "\n    %s %v: %d credentials, rate %g burst %d", c.Name, c.Kinds, c.Creds, c.Rate, c.Burst)
		if len(c.Keys) > 0 {
			fmt.Fprintf(&b, ", {%s}", jsonFields(c.Keys))
		}
		for _, k := range slices.Sorted(maps.Keys(c.KindKeys)) {
			fmt.Fprintf(&b, ", %s: {%s}", k, jsonFields(c.KindKeys[k]))
		}
		if c.Connections > 1 {
			fmt.Fprintf(&b, ", %d connections a property", c.Connections)
		}
		fmt.Fprintf(&b, ", vendor %+v", c.Vendor)
	}
	return b.String()
}
