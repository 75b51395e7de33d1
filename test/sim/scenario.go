// Package sim runs the real sync pipeline (syncer, dispatcher, limiter,
// lanes, ARI state, push client) in simulated time, inside a
// testing/synctest bubble, against in-memory DynamoDB (minidyn plus the
// billing, size limit, latency and outages it lacks: DB), SQS (SQS),
// Lambda event source mappings (esm) and OTAs (Vendor). Every draw comes
// from a seeded math/rand/v2 source. Run is the entry point; the tests in
// this package run a small version of every scenario, and
// scripts/sim.sh runs the full ones.
//
// The oracle (Ledger, and the Vendors' window checks) shares no code with
// the SDK: it keeps the PMS's newest value and every OTA's copy day by day
// with its own arithmetic and counts sends with sdk/limiter/limitertest/window.
//
// Invariants, checked on every run (Report.Violations; a test fails on
// any and prints the seed): no vendor window holds more sends than
// burst + rate·(W + λ), λ the limiter's documented allowance for the
// latency of its writes (sends over burst + rate·W within it are reported
// apart); every day an OTA holds at the end equals the PMS's newest value,
// and no push ever replaced a day's newer sequence with an older one;
// every dead letter has a reason; no message is left on the work queues
// after the drain and no invocation runs into the function timeout.
//
// The adversary (adversary.go; scripts/sim.sh adversary) draws whole
// cases from a seed rather than running a named scenario: a small fleet,
// config keys from docs/configuration.md's space (each case a config
// that config.Parse accepts), a vendor per channel from a catalogue
// (Retry-After forms, the IETF RateLimit fields, a concurrency cap, a
// calendar quota in its own zone, items metering, extra windows, shared
// meters, slow answers, hangs past every timeout, answers over 64 KB, 5xx
// bursts, a 401 span, a halving limit, 429s of the vendor's own overload
// asking for a penalty of seconds to minutes, a quota beside a vendor
// down for a stretch, the expedia-ar and opentravel formats with refusals
// inside a 200 at each scope and malformed answers, a vendor silent past
// the lease: adversary_formats.go, ota_formats.go), faults (store
// outages, lost write answers, a store as slow as the emulator under a
// repricing wave, Lambda deaths, duplicate and late deliveries, clock
// skew, Secrets Manager outages) and loads (a storm, a hot property, 64
// connections a property, hundreds of single-day changes to one lane).
// Beside the invariants above it checks, at the vendor, requests in
// flight against max_in_flight, each quota period's count against the
// quota and that every request carries its credential; that no change is
// sent again more than 10 times, that no dead letter is over a refused
// credential or hotel; in the store, that no write replacing a lane's
// pending set (a compaction) names an older change for a date the set
// keeps (lanecheck.go); and it runs a last sweep after the drain that
// must find nothing. A failing
// case prints the line that replays it and is shrunk: its parts are
// dropped one at a time while the same invariant still fails.
//
// Replays: the seed fixes every draw the simulation makes (arrivals,
// values, latencies, faults, deaths, duplicates). It cannot fix the order
// in which goroutines runnable at the same simulated instant run, nor Go's
// map iteration order inside the SDK, so a replay reproduces the scenario
// and its figures to within a few percent, not bit for bit.
package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// ChannelSpec is one OTA and how the fleet reaches it.
type ChannelSpec struct {
	Name  string
	Kinds []string // its endpoints, one per kind
	// Creds is how many credentials the channel's properties are spread
	// over (property i uses credential i mod Creds).
	Creds int
	Rate  float64
	Burst int
	// Shards, if > 0, sets the endpoints' shards.
	Shards int
	// Adaptive gives the endpoints adaptive limits (`"adaptive": {}`).
	Adaptive bool
	// Keys are more keys of every endpoint's config, each a raw JSON
	// value by key; KindKeys the same for one kind's endpoint only (the
	// adversary draws them).
	Keys     map[string]string
	KindKeys map[string]map[string]string
	// Vendor is how the OTA behaves beyond its rate limit.
	Vendor VendorSpec
	// Connections is how many connections each property has to the
	// channel (0 and 1: one), each its own hotel ref and lanes.
	Connections int
}

// VendorSpec is what an OTA does beside metering requests against the
// channel's published limit; the zero value does nothing more.
type VendorSpec struct {
	// RetryAfter is how a 429 says when to come back: "" or "seconds",
	// "date" (an HTTP-date), "huge" (a day, in seconds), "none", or
	// "ratelimit" (no Retry-After: the IETF RateLimit fields' r=0 and t,
	// which draft-11 makes the wait).
	RetryAfter string
	// RateLimitHeaders adds the IETF draft-11 fields to every answer:
	// "" none, "draft11" the vendor's true remaining, "malformed"
	// unparseable fields, "reduced" a 503 temporary-reduced-capacity with
	// a lower policy now and then.
	RateLimitHeaders string
	// InFlight, if > 0, is how many requests of one bucket the vendor
	// serves at once: one more is answered 429. MaxInFlight is the
	// config's max_in_flight, which the vendor checks (0: none).
	InFlight, MaxInFlight int
	// Quota, if set, is a calendar quota the vendor keeps per bucket, in
	// its own zone: a request past it is answered 429 until the reset.
	Quota *VendorQuota
	// Items meters items (room-rate days) × ItemWeight, not requests.
	Items      bool
	ItemWeight float64
	// Windows are more limits the vendor enforces on each bucket.
	Windows []window.Limit
	// Meters maps an endpoint's kind to a meter it shares with others:
	// the vendor counts them as one bucket.
	Meters map[string]string
	// Hang is the share of requests the vendor never answers.
	Hang float64
	// Slow answers at p50 1 s, p99 8 s instead of the scenario's latency.
	Slow bool
	// BigAnswers is the share of accepted pushes answered with a body
	// over 64 KB.
	BigAnswers float64
	// Unauthorized is a span of the run (from its start) during which
	// the vendor answers 401 to the first credential, as after a rotation
	// the fleet has not read yet.
	Unauthorized [2]time.Duration
	// Unchecked exempts the channel from the window, in-flight and quota
	// invariants: a channel in shadow mode pushes at once by design.
	Unchecked bool
	// Wire, if set, is an XML format the vendor speaks and what it
	// refuses in it (ota_formats.go).
	Wire *WireSpec
	// HangSpan is a span of the run during which the vendor answers no
	// request (past every timeout).
	HangSpan [2]time.Duration
	// LateSpan is a span of the run during which the vendor applies
	// every request it accepts but answers none (past every timeout):
	// the OTA holds a push its sender counts as failed.
	LateSpan [2]time.Duration
	// Overload is the share of requests the vendor answers 429 whatever
	// the bucket holds (its own overload), asking each time for Penalty
	// (at least a second) in RetryAfter's form.
	Overload float64
	Penalty  time.Duration
	// Down is a span of the run (from its start) during which this vendor
	// answers 503 to every request it counts.
	Down [2]time.Duration
	// Strict checks the vendor's windows at burst + rate·W with no
	// allowance for the store's latency (only the clock skew's rate·δ):
	// docs/design.md's bound for a bucket that keeps a margin.
	Strict bool
	// LocalShare checks the channel's windows as on_store_unavailable
	// local-share documents them (docs/design.md, "local-share can exceed
	// the limit briefly"): from each store outage's start until every
	// process's breaker can have closed after it and a push granted then
	// has left (Vendor.localSpans), processes pacing locally add their
	// shares to what the shared bucket grants others.
	LocalShare bool
	// Box, if > 0, is when (from the run's start) the vendor puts each
	// bucket in a penalty box once: the bucket's first request from then
	// is answered 429 asking for BoxFor, in RetryAfter's form
	// (adversary_parts_silence.go).
	Box, BoxFor time.Duration
}

// VendorQuota is a calendar quota: Count requests a Period ("hour" or
// "day") reset at the period's start in Zone.
type VendorQuota struct {
	Count  int
	Period string
	Zone   string
}

// Load is how the PMS's changes arrive: Rate(t) changes per second at
// simulated time t from the start, for Duration.
type Load struct {
	Duration time.Duration
	Rate     func(t time.Duration) float64
	// Kinds weights availability, rates, restrictions.
	Kinds [3]float64
	// MaxDays is the longest range a change covers (1..MaxDays days,
	// within the first WithinDays days of the horizon).
	MaxDays, WithinDays int
	Rooms, Plans        int
}

// Burst is an extra one-off wave of changes: Per property, every room-rate
// gets Changes ranges of Days days each, sent evenly over Over from At.
type Burst struct {
	At, Over             time.Duration
	Properties           int
	RangeDays, Ranges    int
	Rooms, Plans         int
	StopSellsPerSecond   float64 // urgent availability closes during the wave
	StopSellsPerProperty bool
}

// Faults are what goes wrong during a run.
type Faults struct {
	// DBOutage is a span during which every DynamoDB call fails.
	DBOutage [2]time.Duration
	// LimiterOutage is a span during which every call on the limiter's
	// table fails (the ARI state and the lanes stay up): the outage
	// on_store_unavailable answers. A scenario sets this or DBOutage.
	LimiterOutage [2]time.Duration
	// Vendor5xx is a span during which channel Vendor5xxChannel answers 503.
	Vendor5xx        [2]time.Duration
	Vendor5xxChannel int
	// HalveAt halves channel HalveChannel's real limit from then on
	// (0: never); its published limit stays.
	HalveAt      time.Duration
	HalveChannel int
	// LambdaDeath is the chance an invocation dies mid-batch.
	LambdaDeath float64
	// DeferredDeaths is a span during which every invocation of the
	// deferred queue dies DeferredDeathAfter after it began: a lane job's
	// message killed on every receive the redrive policy allows.
	DeferredDeaths     [2]time.Duration
	DeferredDeathAfter time.Duration
	// Duplicates is the chance a receive hands a message out twice.
	Duplicates float64
	// Refusals is the chance a vendor refuses a push it would accept.
	Refusals float64
	// LostAnswers is the chance a DynamoDB call that succeeded answers
	// with an error all the same (a timeout after the write landed).
	LostAnswers float64
	// LateDeliveries is the most an SQS delay is late by, as a share of
	// the delay (real SQS under scaling is late by seconds).
	LateDeliveries float64
	// ClockSkew is the most an execution environment's clock is off, in
	// either direction (the limiter's documented δ).
	ClockSkew time.Duration
	// SecretsOutage is a span during which Secrets Manager fails; the
	// credentials are then secrets (secret_id), not environment variables.
	SecretsOutage [2]time.Duration
	// SlowStore is a span during which a share SlowShare of DynamoDB's
	// answers take SlowLatency (a throttled partition, a retried write, a
	// GC pause) instead of DBLatency; SlowLatency's draws never pass
	// SlowCap.
	SlowStore   [2]time.Duration
	SlowShare   float64
	SlowLatency Latency
	SlowCap     time.Duration
}

// Scenario is a named, seeded run.
type Scenario struct {
	Name       string
	Seed       uint64
	Properties int
	Channels   []ChannelSpec
	Load       Load
	Burst      *Burst
	Faults     Faults
	// DB, SQS and OTA latencies.
	DBLatency, SQSLatency, OTALatency Latency
	// DBServe, if > 0, makes DynamoDB one server that works on one call
	// at a time for DBServe each, first come first served, beside
	// DBLatency's round trip: the local stack's single-threaded emulator
	// (about 250 calls a second), whose answers under a burst take as
	// long as the calls queued before them.
	DBServe time.Duration
	// MaxConcurrency caps each event source (0: the config's).
	MaxConcurrency int
	// Deployment, if set, is when the release with "share" replaces the
	// one before it: environments wired before it run the config without
	// any "share" (run.go, oldRelease), and get no invocation from it on;
	// those running finish theirs (at most the function's timeout).
	Deployment time.Duration
	// CheckItems has every read of the in-memory DynamoDB compare the item
	// it kept with minidyn's (items.go); the small runs set it.
	CheckItems bool
	// Drain is how long the run may go on after the load, for the fleet to
	// catch up; it ends as soon as every lane is fresh, the queues are
	// empty and no lane is left to the sweep.
	Drain time.Duration
	// SweepEvery is the sweep schedule (syncer.SweepInterval by default).
	SweepEvery time.Duration
	// MemoryGB is the function's memory, for GB-seconds.
	MemoryGB float64
	// LingerRunsItsCourse wires the syncer as the pipeline demo does (no
	// FillQuota) rather than as functions/sync does.
	LingerRunsItsCourse bool
	// Margin is every endpoint's config "margin" (empty: the config's
	// default): the calibration run keeps the demo's, whose slots are
	// reached a slow emulator's claim and render after they come.
	Margin string
	// Parity, if set, checks an expedia-ar channel's parity on a schedule
	// while hoteliers edit its OTA by hand (adversary_parts_parity.go).
	Parity *Parity
	// Share is every plain endpoint's "share" (raw JSON), none when empty;
	// FLEETBUCKET_SIM_SHARE sets it for any scenario.
	Share string
	// Top are top-level config keys (raw JSON values by key).
	Top map[string]string
	// Linger, if set, is how the syncer lingers: "none", "course" or
	// "yield" (see sim.lingerMode).
	Linger string
	// HotProperty is the share of the load that goes to property 0.
	HotProperty float64
	// FinalSweep runs a sweep after the drain: it must find nothing.
	FinalSweep bool
	// StoredConnections keeps the properties' connections in the
	// connections table, imported before the run, and has every execution
	// environment read them through its cache, as the deployed function
	// does; otherwise they are the config's properties.
	StoredConnections bool
	// Bulks are one-off uploads of many single-day changes to one lane;
	// Reprice, if set, a wave over every property's every cell.
	Bulks   []Bulk
	Reprice *Reprice
	// Busy, if set, is a stretch of changes faster than the load's
	// (adversary_parts_slow.go).
	Busy *Busy
	// ConnEvents are an operator's writes to the connections table during
	// the run (adversary_parts_wiring.go); they need StoredConnections.
	ConnEvents []ConnEvent
	// playConn, if set, chooses which ConnEvents are played; the oracle
	// still reads them all (a test of the oracle drops one).
	playConn func(ConnEvent) bool
	// Onboard, if set, connects hotels whose state the store already
	// holds and resyncs them (onboard.go).
	Onboard *Onboard
	// TraceLanes keeps a lane trace in memory (lanetrace.go), for
	// Report.LaneTrace: a failing adversary case prints the records of the
	// lane it names, since a replay need not fail again.
	TraceLanes bool
	// Note says what the scenario scaled down or assumed.
	Note string
}

// Hourly is the share of a day's changes in each hour (UTC, sums to 1):
// quiet nights, a morning repricing peak, a long afternoon.
var Hourly = [24]float64{
	0.015, 0.01, 0.01, 0.01, 0.015, 0.025, 0.045, 0.07, 0.085, 0.08, 0.07, 0.06,
	0.055, 0.055, 0.055, 0.05, 0.05, 0.045, 0.045, 0.04, 0.035, 0.03, 0.025, 0.02,
}

func peakShare() float64 {
	m := 0.0
	for _, s := range Hourly {
		m = max(m, s)
	}
	return m
}

var fiveChannels = []string{"booking", "expedia", "airbnb", "agoda", "hotelbeds"}

func allKinds() []string { return []string{"availability", "rates", "restrictions"} }

// awsLatencies are DynamoDB p50 5 ms / p99 25 ms, SQS 10/60 ms and an OTA
// answering in 120/600 ms.
func awsLatencies(s *Scenario) {
	s.DBLatency = Latency{P50: 5 * time.Millisecond, P99: 25 * time.Millisecond}
	s.SQSLatency = Latency{P50: 10 * time.Millisecond, P99: 60 * time.Millisecond}
	s.OTALatency = Latency{P50: 120 * time.Millisecond, P99: 600 * time.Millisecond}
}

// Size scales a scenario: Full is what scripts/sim.sh runs, Small what
// go test runs.
type Size int

const (
	Small Size = iota
	Full
)

// Named returns the scenario name at size, seeded with seed.
func Named(name string, size Size, seed uint64) (Scenario, error) {
	var s Scenario
	switch name {
	case "calibrate":
		s = calibrate()
	case "steady":
		s = steady(size)
	case "storm":
		s = storm(size)
	case "single-credential":
		s = singleCredential(size, 0)
	case "single-credential-sharded":
		s = singleCredential(size, 4)
	case "faults":
		s = faults(size)
	case "onboarding":
		s = onboarding(size)
	default:
		return s, fmt.Errorf("no scenario %q: want calibrate, steady, storm, single-credential, single-credential-sharded, faults or onboarding", name)
	}
	s.Seed = seed
	if v := os.Getenv("FLEETBUCKET_SIM_SHARE"); v != "" {
		s.Share = v
	}
	s.CheckItems = size == Small
	if s.SweepEvery == 0 {
		s.SweepEvery = 5 * time.Minute
	}
	if s.MemoryGB == 0 {
		s.MemoryGB = 0.25 // the stack's default 256 MiB
	}
	return s, nil
}

// Scenarios are the names Named knows, in the order the tests run them.
var Scenarios = []string{"calibrate", "steady", "storm", "single-credential", "single-credential-sharded", "faults", "onboarding"}

// calibrate is the default pipeline demo's own run (test/pipelinedemo):
// 5 hotels, 400 events over 20 s, 4 req/s burst 8 per credential and
// endpoint on two OTAs, 8 workers per queue, a sweep every 30 s, with the
// latencies measured on the emulators (moto DynamoDB p50 ~52 ms).
func calibrate() Scenario {
	return Scenario{
		Name: "calibrate", Properties: 5,
		Channels: []ChannelSpec{
			{Name: "booking_com", Kinds: allKinds(), Creds: 1, Rate: 4, Burst: 8},
			{Name: "expedia", Kinds: []string{"availability", "rates"}, Creds: 1, Rate: 4, Burst: 8},
		},
		Load: Load{Duration: 20 * time.Second, Rate: func(time.Duration) float64 { return 20 }, Kinds: [3]float64{1, 1, 1},
			MaxDays: 7, WithinDays: 60, Rooms: 3, Plans: 1},
		DBLatency:      Latency{P50: 52 * time.Millisecond, P99: 170 * time.Millisecond},
		SQSLatency:     Latency{P50: 8 * time.Millisecond, P99: 40 * time.Millisecond},
		OTALatency:     Latency{P50: 2 * time.Millisecond, P99: 10 * time.Millisecond},
		MaxConcurrency: 8, Drain: 2 * time.Minute, SweepEvery: 30 * time.Second, LingerRunsItsCourse: true, Margin: "500ms",
		Note: "the pipeline demo's defaults (margin 500 ms); DynamoDB latency as the demo measured on single-threaded moto (p50 52 ms), the mock OTA on loopback",
	}
}

// steady is 10,000 properties on 5 channels at 20 M changes a day, spread
// by hour of day: the run simulates the peak hour's rate (Hourly) for a
// stretch, since every other hour is lighter. Each credential carries 100
// properties whatever the fleet's size, so every bucket sees the same load
// in the small run as in the full one.
func steady(size Size) Scenario {
	props, dur := 10000, 2*time.Minute
	if size == Small {
		props, dur = 100, 2*time.Minute
	}
	// FLEETBUCKET_SIM_DURATION lengthens the load, for analyses that need
	// more than its first minutes (test/sim/leasewhatif).
	if d, err := time.ParseDuration(os.Getenv("FLEETBUCKET_SIM_DURATION")); err == nil && d > 0 {
		dur = d
	}
	// FLEETBUCKET_SIM_PROPERTIES sets the fleet's size: every bucket keeps
	// its load (100 properties a credential), so a run between the small
	// and the full one shows how the simulation's cost grows with the fleet.
	if n, err := strconv.Atoi(os.Getenv("FLEETBUCKET_SIM_PROPERTIES")); err == nil && n > 0 {
		props = n
	}
	s := steadyOf("steady", props, dur)
	s.StoredConnections = true
	return s
}

func steadyOf(name string, props int, dur time.Duration) Scenario {
	perDay := 20e6 * float64(props) / 10000
	rate := perDay * peakShare() / 3600
	s := Scenario{Name: name, Properties: props, Load: Load{Duration: dur, Rate: func(time.Duration) float64 { return rate },
		Kinds: [3]float64{0.35, 0.45, 0.2}, MaxDays: 14, WithinDays: 365, Rooms: 5, Plans: 2}, Drain: 10 * time.Minute,
		Note: fmt.Sprintf("%d properties; %v at the peak hour's rate (%.1f changes/s: %.1f%% of 20 M/day × %d/10,000 in one hour)",
			props, dur, rate, 100*peakShare(), props)}
	for _, n := range fiveChannels {
		// A channel manager's connections to one OTA: 100 properties per
		// credential (chains, groups), each endpoint 10 req/s, burst 20.
		s.Channels = append(s.Channels, ChannelSpec{Name: n, Kinds: allKinds(), Creds: max(props/100, 1), Rate: 10, Burst: 20})
	}
	awsLatencies(&s)
	return s
}

// onboarding is steady's load plus hotels connected at once, each resynced
// (365 days × 20 room-rates: 5 rooms × 4 plans, every kind) 30 s into the
// run: the first Properties of the fleet, whose stored state no OTA holds
// yet. FLEETBUCKET_SIM_ONBOARD overrides how many.
func onboarding(size Size) Scenario {
	s := steady(size)
	s.Name = "onboarding"
	o := &Onboard{Properties: 500, Rooms: 5, Plans: 4, Days: 365, At: 30 * time.Second}
	if size == Small {
		o.Properties = 10
	}
	if n, err := strconv.Atoi(os.Getenv("FLEETBUCKET_SIM_ONBOARD")); err == nil && n > 0 {
		o.Properties = min(n, s.Properties)
	}
	s.Onboard = o
	s.Drain = 30 * time.Minute
	s.Note = strings.Replace(s.Note, "properties;", "properties (steady's load);", 1) + fmt.Sprintf(
		"; onboarding: %d of them connected at %v, each resyncing %d days × %d room-rates (%d rooms × %d plans) of every kind from its stored state",
		o.Properties, o.At, o.Days, o.Rooms*o.Plans, o.Rooms, o.Plans)
	return s
}

// storm: 2,000 properties reprice 365 days × 10 room-rates within one
// minute, on the peak hour's background; stop-sells arrive during it.
// FLEETBUCKET_SIM_PROPERTIES overrides the fleet's size.
func storm(size Size) Scenario {
	props, dur := 2000, 3*time.Minute
	if size == Small {
		props, dur = 10, 2*time.Minute
	}
	if n, err := strconv.Atoi(os.Getenv("FLEETBUCKET_SIM_PROPERTIES")); err == nil && n > 0 {
		props = n
	}
	s := steadyOf("storm", props, dur)
	s.Burst = &Burst{At: 30 * time.Second, Over: time.Minute, Properties: props, RangeDays: 31, Ranges: 12, Rooms: 5, Plans: 2, StopSellsPerSecond: 2}
	s.Drain = 40 * time.Minute
	s.Note += fmt.Sprintf("; storm: %d properties × 10 room-rates (5 rooms × 2 plans) reprice 365 days as 12 monthly ranges each (%d changes, %d days) within one minute from 0:30, 2 stop-sells/s meanwhile",
		props, props*10*12, props*10*12*31)
	return s
}

// singleCredential: every property behind one credential per channel, at
// 200 req/s burst 400 per endpoint: every push of a channel and kind books
// one item.
func singleCredential(size Size, shards int) Scenario {
	props, dur := 10000, 2*time.Minute
	if size == Small {
		props, dur = 100, 2*time.Minute
	}
	name := "single-credential"
	if shards > 0 {
		name = "single-credential-sharded"
	}
	s := steadyOf(name, props, dur)
	s.Channels = nil
	for _, n := range fiveChannels {
		s.Channels = append(s.Channels, ChannelSpec{Name: n, Kinds: allKinds(), Creds: 1, Rate: 200, Burst: 400, Shards: shards})
	}
	s.Note += "; one credential per channel, 200 req/s burst 400 per endpoint"
	if shards > 0 {
		s.Note += fmt.Sprintf(", %d shards", shards)
	}
	return s
}

// faults is the steady load plus a 10-minute DynamoDB outage, an OTA
// answering 5xx for 5 minutes, one OTA halving its real limit, Lambda
// deaths and duplicate deliveries. The full run takes 400 properties (4
// credentials per channel, each with the steady run's load) for 45
// minutes; the small one compresses the faults into 5.
func faults(size Size) Scenario {
	var s Scenario
	if size == Full {
		// Faults apart by more than the visibility timeout (6 min), which
		// is how long a change that failed during the outage waits.
		s = steadyOf("faults", 400, 45*time.Minute)
		s.Faults = Faults{DBOutage: [2]time.Duration{5 * time.Minute, 15 * time.Minute}, Vendor5xx: [2]time.Duration{25 * time.Minute, 30 * time.Minute},
			Vendor5xxChannel: 1, HalveAt: 38 * time.Minute, HalveChannel: 2}
	} else {
		s = steadyOf("faults", 40, 5*time.Minute)
		s.Faults = Faults{DBOutage: [2]time.Duration{time.Minute, 2 * time.Minute}, Vendor5xx: [2]time.Duration{150 * time.Second, 210 * time.Second},
			Vendor5xxChannel: 1, HalveAt: 4 * time.Minute, HalveChannel: 2}
	}
	// The OTA whose limit halves is a slow one with adaptive buckets:
	// halved, its limit is under what its busiest buckets are asked for
	// (about 2 pushes a second at 100 properties a credential; 0.8 in the
	// small run), so the fleet earns 429s and must learn the new rate.
	// At the steady run's 10/s, half would still be far above the load,
	// and the fault would test nothing.
	slow := &s.Channels[s.Faults.HalveChannel]
	slow.Rate, slow.Burst, slow.Adaptive = 3, 6, true
	if size != Full {
		slow.Rate, slow.Burst = 1.2, 4
	}
	s.Faults.LambdaDeath, s.Faults.Duplicates = 0.01, 0.01
	s.Drain = 30 * time.Minute
	s.Note += fmt.Sprintf("; DynamoDB out %v–%v, %s answers 503 %v–%v, %s (%g/s, adaptive) halves its real limit at %v, 1%% of invocations die mid-batch, 1%% of receives duplicated",
		s.Faults.DBOutage[0], s.Faults.DBOutage[1], fiveChannels[1], s.Faults.Vendor5xx[0], s.Faults.Vendor5xx[1], fiveChannels[2], slow.Rate, s.Faults.HalveAt)
	return s
}
