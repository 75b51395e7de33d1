package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// The stack's settings (infra/stack), repeated here rather than imported:
// the CDK module stays out of the root module's graph.
const (
	functionTimeout   = 60 * time.Second
	visibility        = 6 * functionTimeout
	maxReceiveCount   = 5
	deferredBatchSize = 10
	eventSources      = 2
)

// sim is one run in progress.
type sim struct {
	sc  Scenario
	cfg *config.Config
	// cfgOld is the release before the deployment's (Scenario.Deployment).
	cfgOld  *config.Config
	db      *DB
	sqs     *SQS
	ledger  *Ledger
	vendors []*Vendor
	http    *http.Client
	changes *Queue
	defers  *Queue
	start   time.Time
	rng     *rand.Rand // the producer's
	// maxInstances is what every LocalShare divides limits by.
	maxInstances int
	// progress, if set, gets a line every simulated minute.
	progress io.Writer

	mu      sync.Mutex
	running int // invocations in progress
	idle    []*instance
	all     []*instance // every environment made, for their leases' counts
	stats   Stats
	seq     map[int32]int64
	// samples are the run's state every sampleEvery.
	samples []Sample
	mem     memWatch
	// copyOf is the scenario channel of each of the ledger's OTA copies.
	copyOf []int
	// connErrs are operator writes to the connections table that failed.
	connErrs []string
	// skewRNG draws each environment's clock offset (Faults.ClockSkew).
	skewRNG *rand.Rand
	// FinalSweepFound are the lanes the sweep after the drain pushed.
	finalSwept int
	// deaths are the killed invocations' lanes, which the drain waits
	// for (deaths.go).
	deaths laneDeaths
	// trace, if set, records which environment made each push (trace.go).
	trace *pushTrace
	// lanes, if set, records what became of each lane (lanetrace.go).
	lanes *laneTrace
	// retries counts the changes Retry sends again; secrets is Secrets
	// Manager (ota_formats.go).
	retries *retries
	secrets *secrets
	// parity is the parity schedule's state (adversary_parts_parity.go).
	parity *paritySim
}

// instance is one Lambda execution environment: its own limiter, caches and
// push client, like a process of the function.
type instance struct {
	sy  *syncer.Syncer
	p   *pipeline.Pipeline
	env int  // its number, for the push trace
	old bool // of the release before Scenario.Deployment
}

// Stats is what the pipeline did, as the workers and queues saw it.
type Stats struct {
	Changes, FannedOut, StopSells       int
	Invocations, Deaths, Cold, Timeouts int
	GBSeconds                           float64
	Outcomes                            map[dispatch.Outcome]int
	Pushes, Items, Wasted, Throttled    int
	// DeathGrace is what the drain granted the lane that met the most
	// deaths (DeathLane, DeathsOfLane of them; deaths.go).
	DeathGrace   time.Duration
	DeathLane    string
	DeathsOfLane int
	// WastedByMinute and WastedByChannel split Wasted (slots booked and
	// never used) by the minute they were given up in and by channel.
	WastedByMinute  []int
	WastedByChannel map[string]int
	// RevokedByChannel counts, by channel, slots booked ahead on an
	// adaptive bucket that a throttle revoked before they came.
	RevokedByChannel         map[string]int
	StoreErrors, LocalShares int
	Sweeps                   int
	// SweptItems and SweptLanes are the lane items the sweeps found due
	// and the stranded lanes they took over.
	SweptItems, SweptLanes         int
	InvalidChanges, FailedMessages int
	// RetriedChanges are failed changes sent again after a backoff
	// (syncer.Retry) rather than left for the visibility timeout.
	RetriedChanges int
	// Bulk is what the jobs of the bulk class did (onboard.go).
	Bulk BulkStats
	// LoadEnd is when the PMS sent its last change, EndedAt when the run
	// ended (drained or out of time), both from its start.
	LoadEnd, EndedAt time.Duration
}

// Sample is the state of the run at one instant.
type Sample struct {
	At time.Duration
	// DirtyLanes is every lane some OTA is behind on; Floor the
	// quota-bound floor: the fullest bucket's dirty lanes ÷ its rate.
	DirtyLanes int
	Floor      time.Duration
	Backlog    int // messages on the changes and deferred queues
}

const sampleEvery = 10 * time.Second

// Run runs sc to its end in the calling goroutine, which must be inside a
// synctest bubble (or accept real time), and returns the report.
func Run(ctx context.Context, sc Scenario, progress io.Writer) (*Report, error) {
	root := rand.New(rand.NewPCG(sc.Seed, 0x5eed))
	child := func() *rand.Rand { return rand.New(rand.NewPCG(root.Uint64(), root.Uint64())) }
	s := &sim{sc: sc, start: time.Now(), rng: child(), seq: map[int32]int64{}, progress: progress,
		stats: Stats{Outcomes: map[dispatch.Outcome]int{}}}
	s.trace = newPushTrace(s.start)
	// The ledger keeps one OTA copy per connection: a property connected
	// twice to a channel is two hotels there.
	var names []string
	var carries [][3]bool
	firstCopy := make([]int, len(sc.Channels))
	for i, c := range sc.Channels {
		firstCopy[i] = len(names)
		var carry [3]bool
		for _, k := range c.Kinds {
			carry[indexOf(kindNames, k)] = true
		}
		for n := range max(c.Connections, 1) {
			name := c.Name
			if n > 0 {
				name = fmt.Sprintf("%s~%d", c.Name, n)
			}
			names = append(names, name)
			carries = append(carries, carry)
			s.copyOf = append(s.copyOf, i)
		}
	}
	s.ledger = NewLedger(s.start, names, carries)
	if sc.xmlScenario() {
		s.ledger.wire = wireLedger{}
	}
	s.retries, s.secrets = &retries{start: s.start, count: map[string]int{}, dups: map[string]int{}, why: map[string][]string{}}, &secrets{s: s}
	s.db = NewDB(child(), sc.DBLatency)
	s.db.serve = sc.DBServe
	s.db.checkItems = sc.CheckItems
	s.sqs = NewSQS(child(), sc.SQSLatency, sc.Faults.Duplicates, maxReceiveCount)
	s.retries.SQS = s.sqs
	s.sqs.duplicated = s.retries.duplicated
	// Drawn apart from the streams above, so that a run without these
	// faults draws what it always drew.
	faults := rand.New(rand.NewPCG(sc.Seed, 0xfa17))
	s.db.lose, s.db.loseRNG = sc.Faults.LostAnswers, rand.New(rand.NewPCG(faults.Uint64(), faults.Uint64()))
	s.sqs.late, s.sqs.lateRNG = sc.Faults.LateDeliveries, rand.New(rand.NewPCG(faults.Uint64(), faults.Uint64()))
	s.skewRNG = rand.New(rand.NewPCG(faults.Uint64(), faults.Uint64()))
	if s.lanes = newLaneTrace(s.start); s.lanes == nil && sc.TraceLanes {
		s.lanes = &laneTrace{start: s.start, lines: map[string][]string{}}
	}
	if s.lanes != nil {
		s.ledger.slow, s.db.laneTrace, s.sqs.laneTrace = &slowest{}, s.lanes, s.lanes
	}
	s.changes = s.sqs.Create("changes", visibility)
	s.defers = s.sqs.Create("deferred", visibility)
	s.sqs.Create("dlq", visibility)

	cfg, err := config.Parse([]byte(connections(sc)))
	if err != nil {
		return nil, fmt.Errorf("sim config: %w", err)
	}
	s.cfg = cfg
	if sc.Deployment > 0 {
		if s.cfgOld, err = config.Parse([]byte(connections(oldRelease(sc)))); err != nil {
			return nil, fmt.Errorf("sim config of the release before the deployment: %w", err)
		}
	}
	conc := sc.MaxConcurrency
	if conc == 0 {
		conc = cfg.MaxConcurrency()
	}
	s.maxInstances = eventSources * conc

	props := make(map[string]int32, sc.Properties)
	for p := range sc.Properties {
		props[propID(p)] = int32(p)
	}
	tr := &Transport{Vendors: map[string]*Vendor{}}
	for i, c := range sc.Channels {
		lat := sc.OTALatency
		if c.Vendor.Slow {
			lat = Latency{P50: time.Second, P99: 8 * time.Second}
		}
		v := NewVendor(c.Name, firstCopy[i], s.ledger, child(), lat, window.Limit{Rate: c.Rate, Burst: c.Burst}, props)
		v.allowance = int(math.Ceil(c.Rate * (2*sc.DBLatency.P99.Seconds() + sc.Faults.ClockSkew.Seconds())))
		if f := sc.Faults; f.SlowStore[1] > f.SlowStore[0] && !keepsMargin(c) {
			v.allowance = max(v.allowance, noMarginAllowance(c, f))
		}
		if c.Vendor.Strict && keepsMargin(c) {
			v.allowance = int(math.Ceil(c.Rate * sc.Faults.ClockSkew.Seconds()))
		}
		v.refuse = sc.Faults.Refusals
		if sc.Onboard != nil {
			v.Arrivals = map[string][]arrival{}
		}
		v.spec, v.maxInFlight = c.Vendor, c.Vendor.MaxInFlight
		v.localSpans, v.instances = localSpans(sc.Faults, cfg.PushTimeout()), s.maxInstances
		if c.Vendor.Unchecked {
			v.allowance = math.MaxInt32
		}
		s.vendors = append(s.vendors, v)
		tr.Vendors[c.Name+".sim"] = v
	}
	// The function's client times out with the push (pipeline.New).
	s.http = &http.Client{Transport: tr, Timeout: cfg.PushTimeout()}
	if err := limiter.CreateTable(ctx, s.db, "limits"); err != nil {
		return nil, err
	}
	if err := ari.CreateTable(ctx, s.db, "state"); err != nil {
		return nil, err
	}
	if sc.StoredConnections {
		if err := s.loadConnections(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if sc.Onboard != nil {
		if err := s.seedOnboard(ctx, *sc.Onboard); err != nil {
			return nil, err
		}
	}
	s.scheduleFaults()
	s.armConnChecks()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	lam := child()
	wg.Go(func() {
		s.esm(runCtx, s.changes, false, syncer.ChangesBatchSize, syncer.ChangesBatchingWindow, conc, lam)
	})
	lam2 := child()
	wg.Go(func() { s.esm(runCtx, s.defers, true, deferredBatchSize, 0, conc, lam2) })
	wg.Go(func() { s.sweepEvery(runCtx) })
	wg.Go(func() { s.sample(runCtx) })
	s.startParity(runCtx, &wg)
	done := make(chan struct{})
	go func() { s.produce(runCtx); close(done) }()
	<-done
	s.stats.LoadEnd = time.Since(s.start)
	s.drain(runCtx)
	if sc.FinalSweep {
		s.finalSweep(runCtx)
	}
	s.stats.EndedAt = time.Since(s.start)
	stop()
	wg.Wait()
	if s.trace != nil {
		if err := s.trace.write(s.stats); err != nil {
			return nil, err
		}
	}
	if s.lanes != nil && s.lanes.path != "" {
		if err := s.lanes.write(s.ledger.slow.all(), s.ledger.channels); err != nil {
			return nil, err
		}
	}
	r := s.report()
	r.lanes = s.lanes
	return r, nil
}

// drain waits until the queues are empty, every lane is fresh and none is
// left to the sweep, or the scenario's drain time is up, plus what the
// run's deaths cost the lane that met the most (deaths.go). A lane may be
// fresh at the OTA and still stranded in the pipeline: a push whose answer
// came after its budget failed, though the vendor applied it, and after
// enough such pushes the lane waits for the sweep's backoff (adversary
// seed 63: the drain ended there, and the final sweep found the lane).
//
// A lane the sweep index lists when that time is up is waited for too,
// until its sweep is due and a sweep has run (at most sweepBackoffCap
// more): the sweep backs off a lane whose pushes failed in a row, 15
// minutes doubling to 4 hours (docs/design.md), so a lane stranded by a
// vendor that hung for a while is pushed again only that long after
// (adversary seed 850: a lane of four failed pushes due at 1h21m, the
// drain over at 1h1m41s, 84 days stale).
func (s *sim) drain(ctx context.Context) {
	start := time.Now()
	progress := newProgress(start)
	for ctx.Err() == nil {
		progress.log(s)
		if s.sqs.Pending(s.changes) == 0 && s.sqs.Pending(s.defers) == 0 && len(s.ledger.DirtyByProp()) == 0 && s.busy() == 0 &&
			s.db.Listed("state", lane.SweepIndex) == 0 {
			return
		}
		wait := time.Second
		if end := start.Add(s.drainTime()); !time.Now().Before(end) {
			due := s.db.LatestListed("state", lane.SweepIndex)
			swept := time.UnixMicro(due).Add(s.sc.SweepEvery + time.Minute)
			if due == 0 || !time.Now().Before(swept) || swept.After(end.Add(sweepBackoffCap)) {
				return
			}
			// Nothing but the sweep moves such a lane: look again once it
			// has run, not every second (each look scans the lane items).
			wait = time.Until(swept)
		}
		_ = sleep(ctx, wait)
	}
}

// sweepBackoffCap is the longest the sweep waits for a lane whose pushes
// keep failing (docs/design.md, lane.MaxSweepBackoff: 4 h), and its
// schedule's interval: the most a drain waits past its time for a lane the
// sweep lists. Repeated here: the oracle shares no code with the SDK.
const sweepBackoffCap = 4*time.Hour + 5*time.Minute

// drainTime is the scenario's drain time, or the silences the vendors
// asked of the busiest bucket and its sends between them (Occupied) if
// longer, and the deaths' grace so far.
// Each 429 of a vendor asking a day silences its bucket for the client's
// 15 minutes, and one of burst 1 meets 429s beyond the overload the case
// drew (silenceDrain's count): a send within the limiter's documented
// rate·λ over burst + rate·W is one. Seed 317 (100 lanes a credential on
// 0.5/s, burst 1, 5% overload, a day's Retry-After) met 8-14 silences a
// bucket where 5% of its 117 requests would draw 6; past 16 the 4 h
// drain ended with 86 days stale, the busiest bucket silenced throughout.
// A silence is waited out by a deferral of its length, which SQS delivers
// up to Faults.LateDeliveries of it late, so each costs that much more:
// seed 358 (one request a quarter hour through its busiest bucket, the
// rest drawing the next 429) came back 15-76 s after each of its 16
// silences, past the 10 minutes the drain kept over them. The 10 minutes
// held a bucket's sends too, until seed 636 (rate 0.5, burst 1, a day's
// Retry-After, 495 sends between 57 silences: 16 min of sends) ended its
// drain while the bucket still drained between its silences.
func (s *sim) drainTime() time.Duration {
	var silenced time.Duration
	isolating := 0
	for _, v := range s.vendors {
		silenced = max(silenced, v.Occupied())
		isolating = max(isolating, v.Isolating())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	late := func(d time.Duration) time.Duration { return d + time.Duration(s.sc.Faults.LateDeliveries*float64(d)) }
	most := maxSilenceDrain + late(time.Duration(isolating)*retryAfterCap)
	return max(s.sc.Drain, min(late(silenced)+10*time.Minute, most)) + s.deaths.grace(visibility)
}

// maxSilenceDrain bounds what the silences may add: a day, the longest a
// vendor here asks. A fleet silenced past it without draining is a
// failure to report, not a run to wait on. A fleet isolating refused
// changes is draining, though, one request a silence where the vendor
// lets no more through (the drain grants each distinct request the vendor
// refused for an unmapped room a silence past the day; one sent again
// adds nothing, so an isolation begun again whole is still reported).
// Seed 358's whole case: the halving vendor under the config's 2/s took
// the first request after each day-long 429's quarter hour and answered
// the next, half a second on, with another; two lanes of some 90 changes
// each, every one of an unmapped room that expedia-ar's answers do not
// name, took 2n−1 requests each to isolate (format.Isolate), about 175
// quarter hours: 44-47 h, 98-101 changes dead-lettered, nothing stale.
const maxSilenceDrain = 24 * time.Hour

func (s *sim) busy() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func propID(p int) string { return fmt.Sprintf("p%05d", p) }

// connections is the scenario's connections.json.
func connections(sc Scenario) string {
	var chs, props []string
	for _, c := range sc.Channels {
		var eps []string
		for _, k := range c.Kinds {
			extra := ""
			if c.Shards > 0 {
				extra = fmt.Sprintf(`, "shards": %d`, c.Shards)
			}
			if sc.Margin != "" {
				extra += fmt.Sprintf(`, "margin": %q`, sc.Margin)
			}
			if c.Adaptive {
				extra += `, "adaptive": {}`
			}
			if sc.Share != "" && c.Shards <= 1 && !c.Adaptive {
				extra += `, "share": ` + sc.Share
			}
			keys := maps.Clone(c.Keys)
			if keys == nil {
				keys = map[string]string{}
			}
			maps.Copy(keys, c.KindKeys[k])
			if len(keys) > 0 {
				extra += ", " + jsonFields(keys)
			}
			eps = append(eps, fmt.Sprintf(`%q: {"path": "/v1/%s", "limit": {"rate": %g, "burst": %d}%s}`, k, k, c.Rate, c.Burst, extra))
		}
		var creds []string
		for i := range c.Creds {
			creds = append(creds, fmt.Sprintf(`"c%d": %s`, i, sc.credentialOf(fmt.Sprintf("TOKEN_%s_%d", strings.ToUpper(c.Name), i))))
		}
		format := ""
		if c.Vendor.Wire.speaks() {
			format = fmt.Sprintf(`"format": %q, `, c.Vendor.Wire.Format)
		}
		if p := sc.Parity; p != nil && p.Channel == c.Name {
			format += p.readKey() + ", "
		}
		chs = append(chs, fmt.Sprintf(`%q: {%s"base_url": "https://%s.sim", "endpoints": {%s}, "credentials": {%s}}`,
			c.Name, format, c.Name, strings.Join(eps, ","), strings.Join(creds, ",")))
	}
	for p := range sc.Properties {
		var conns []string
		for _, c := range sc.Channels {
			for n := range max(c.Connections, 1) {
				codes := ""
				if sc.Onboard.mapsCodes(p) {
					codes = identityCodes(sc)
				}
				conns = append(conns, fmt.Sprintf(`{"channel": %q, "credential": "c%d", "hotel_ref": %q%s}`, c.Name, p%c.Creds, hotelRef(p, n), codes))
			}
		}
		props = append(props, fmt.Sprintf(`%q: [%s]`, propID(p), strings.Join(conns, ", ")))
	}
	top := map[string]string{"max_range_days": "366"}
	maps.Copy(top, sc.Top)
	return fmt.Sprintf(`{%s, "channels": {%s}, "properties": {%s}}`, jsonFields(top), strings.Join(chs, ","), strings.Join(props, ","))
}

// identityCodes are a connection's code mappings (as JSON members) of
// every room type and rate plan sc's changes use, each to itself.
func identityCodes(sc Scenario) string {
	rooms, plans := codesUsed(sc)
	var rs, ps []string
	for _, n := range roomNames[:rooms] {
		rs = append(rs, fmt.Sprintf("%q: %q", n, n))
	}
	for _, n := range planNames[:plans] {
		ps = append(ps, fmt.Sprintf("%q: %q", n, n))
	}
	return fmt.Sprintf(`, "room_types": {%s}, "rate_plans": {%s}`, strings.Join(rs, ", "), strings.Join(ps, ", "))
}

// codesUsed is how many of roomNames and planNames sc's changes reach: the
// load's, the onboarding's, and the extra waves', whose rooms may go past
// the load's (a bulk upload of two room types beside a load of one: seed
// 249's TWN was left out of the whole resync's mapping, and its 300 days
// were dead-lettered as an unmapped room type on two channels).
func codesUsed(sc Scenario) (rooms, plans int) {
	rooms, plans = sc.Load.Rooms, sc.Load.Plans
	if o := sc.Onboard; o != nil {
		rooms, plans = max(rooms, o.Rooms), max(plans, o.Plans)
	}
	for _, b := range sc.Bulks {
		rooms = max(rooms, b.Rooms) // rate plan 0
	}
	if b := sc.Burst; b != nil {
		rooms, plans = max(rooms, b.Rooms), max(plans, b.Plans)
	}
	return rooms, plans
}

// hotelRef is property p's id at an OTA on its n-th connection there.
func hotelRef(p, n int) string {
	if n == 0 {
		return propID(p)
	}
	return fmt.Sprintf("%s~%d", propID(p), n)
}

// jsonFields writes raw JSON values by key as an object's fields, in key
// order (a config's text is then the same for the same draw).
func jsonFields(kv map[string]string) string {
	var fs []string
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		fs = append(fs, fmt.Sprintf("%q: %s", k, kv[k]))
	}
	return strings.Join(fs, ", ")
}

// newInstance wires an execution environment as functions/sync does
// (pipeline.New, as functions/sync/env.go calls it), with the simulated
// clients.
func (s *sim) newInstance() (*instance, error) {
	env, hc := -1, s.http
	var db pipeline.DynamoDBAPI = s.db
	if s.trace != nil {
		env = s.trace.newEnv()
		db = tracedDB{DB: s.db, env: env, trace: s.trace}
		hc = &http.Client{Transport: &tracedTransport{next: s.http.Transport, env: env, trace: s.trace}, Timeout: s.http.Timeout}
	}
	limOpts := []limiter.Option{limiter.WithCircuitBreaker(3, breakerCooldown)}
	if skew := s.sc.Faults.ClockSkew; skew > 0 {
		s.mu.Lock()
		off := time.Duration(s.skewRNG.Int64N(int64(2*skew+1))) - skew
		s.mu.Unlock()
		limOpts = append(limOpts, limiter.WithClock(func() time.Time { return time.Now().Add(off) }))
	}
	_, configLinger := s.sc.Top["linger"]
	stored := func(*syncer.Syncer) {}
	if s.sc.StoredConnections {
		stored = s.withStoredConnections(connReader{s.db})
	}
	var sq queue.SQSAPI = s.sqs
	if s.trace != nil {
		sq = tracedSQS{SQS: s.sqs, env: env, trace: s.trace}
	}
	clients, token := pipeline.Clients{DynamoDB: db, SQS: sq, HTTP: hc}, pipeline.WithToken(s.sc.tokenOf)
	if f := s.sc.Faults.SecretsOutage; f[1] > f[0] {
		clients.Secrets, token = s.secrets, pipeline.WithLimiterOptions() // tokens from Secrets Manager
	}
	cfg, old := s.cfg, s.cfgOld != nil && time.Since(s.start) < s.sc.Deployment
	if old {
		cfg = s.cfgOld
	}
	p, err := pipeline.New(cfg, clients,
		pipeline.Names{LimiterTable: "limits", StateTable: "state", DeferredURL: "deferred", DeadURL: "dlq"},
		pipeline.WithLogger(slog.New(slog.DiscardHandler)), pipeline.WithLimiterOptions(limOpts...),
		token, pipeline.WithLocalShare(s.maxInstances),
		pipeline.WithSyncer(func(sy *syncer.Syncer) {
			sy.FillQuota = s.lingerYields()
			// As functions/sync reads it from the stack: the deferred
			// queue's redrive policy.
			sy.MaxReceives = maxReceiveCount
			if !configLinger {
				sy.Linger = s.linger()
			}
		}), pipeline.WithSyncer(stored))
	if err != nil {
		return nil, err
	}
	in := &instance{sy: p.Syncer, p: p, env: env, old: old}
	s.mu.Lock()
	s.all = append(s.all, in)
	s.mu.Unlock()
	return in, nil
}

// lingerYields and linger wire the syncer's linger as functions/sync does
// (none: a lane's push goes out at its slot), unless the scenario wires the
// pipeline demo (a linger that runs its course) or FLEETBUCKET_SIM_LINGER
// asks, to compare: "course" for the demo's, "yield" for a linger that
// ends once its bucket would fill up (FillQuota).
func (s *sim) lingerYields() bool { return s.lingerMode() == "yield" }

func (s *sim) linger() time.Duration {
	if s.lingerMode() == "none" {
		return -1
	}
	return 0 // syncer.DefaultLinger
}

func (s *sim) lingerMode() string {
	if v := os.Getenv("FLEETBUCKET_SIM_LINGER"); v != "" {
		return v
	}
	if s.sc.Linger != "" {
		return s.sc.Linger
	}
	if s.sc.LingerRunsItsCourse {
		return "course"
	}
	return "none"
}

func (s *sim) acquire() (*instance, error) {
	s.mu.Lock()
	for n := len(s.idle); n > 0; n = len(s.idle) {
		in := s.idle[n-1]
		s.idle = s.idle[:n-1]
		if in.old && time.Since(s.start) >= s.sc.Deployment {
			continue // retired: Lambda invokes the new version only
		}
		s.mu.Unlock()
		return in, nil
	}
	s.stats.Cold++
	s.mu.Unlock()
	return s.newInstance()
}

func (s *sim) release(in *instance) {
	s.mu.Lock()
	s.idle = append(s.idle, in)
	s.mu.Unlock()
}

// esm is an SQS event source mapping: it gathers batches (up to size, for
// up to window once a message is there) and invokes the function with
// each, at most conc at once.
func (s *sim) esm(ctx context.Context, q *Queue, deferred bool, size int, window time.Duration, conc int, r *rand.Rand) {
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		msgs := s.sqs.Receive(q, size)
		if len(msgs) == 0 {
			<-sem
			const poll = 200 * time.Millisecond // a long poll returns as soon as a message arrives
			next := s.sqs.NextVisible(q)
			if next.IsZero() {
				// Nothing on the queue: wait for a message, then for the
				// poll that would have found it, without polling every
				// 200 ms of a long idle drain.
				idle := time.Now()
				if s.sqs.Arrival(ctx, q) != nil {
					return
				}
				polls := time.Since(idle)/poll + 1
				if sleep(ctx, time.Until(idle.Add(polls*poll))) != nil {
					return
				}
				continue
			}
			if sleep(ctx, min(poll, max(time.Until(next), time.Millisecond))) != nil {
				return
			}
			continue
		}
		if window > 0 && len(msgs) < size {
			if sleep(ctx, window) != nil {
				return
			}
			msgs = append(msgs, s.sqs.Receive(q, size-len(msgs))...)
		}
		die := -time.Duration(1)
		if r.Float64() < s.sc.Faults.LambdaDeath {
			die = time.Duration(r.Int64N(int64(3 * time.Second)))
		}
		if deferred && within(s.sc.Faults.DeferredDeaths, s.start, time.Now()) {
			die = s.sc.Faults.DeferredDeathAfter
		}
		wg.Go(func() {
			defer func() { <-sem }()
			s.invoke(ctx, q, msgs, deferred, die)
		})
	}
}

// invoke is one Lambda invocation: the handler's work (HandleBatch), the
// partial batch response (the failed messages stay), the bill. die ≥ 0
// kills it that long after it began: nothing of its batch is deleted.
func (s *sim) invoke(ctx context.Context, q *Queue, msgs []*Message, deferred bool, die time.Duration) {
	in, err := s.acquire()
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	s.running++
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.running--; s.mu.Unlock() }()
	start := time.Now()
	ictx, cancel := context.WithTimeout(ctx, functionTimeout)
	defer cancel()
	if die >= 0 {
		death := &death{}
		ictx = withDeath(ictx, death)
		t := time.AfterFunc(die, func() { death.mark(); cancel() })
		defer t.Stop()
	}
	inv := s.lanes.newInvocation()
	if s.trace != nil && deferred {
		s.trace.received(in.env, msgs)
	}
	batch := make([]syncer.Message, len(msgs))
	for i, m := range msgs {
		s.lanes.received(inv, q.Name, m, die)
		attempt := syncer.AttemptOf(m.Attrs[syncer.RetryAttribute])
		batch[i] = syncer.Message{ID: m.ID, Body: m.Body, Deferred: deferred, Receives: m.Receives, Redelivered: m.Receives > 1 || attempt > 0, Attempt: attempt,
			Owners: syncer.OwnersOf(m.Attrs[syncer.RetryOwnersAttribute])}
	}
	results := in.sy.HandleBatch(ictx, batch)
	// As functions/sync does: a failed change goes again after a backoff.
	var retried map[string]bool
	if !deferred && (die < 0 || time.Since(start) < die) {
		retried = syncer.Retry(ictx, s.retries, q.Name, batch, results)
		for i, m := range batch {
			if retried[m.ID] {
				s.retries.failed(m.Body, m.Attempt+1, results[i].Err)
			}
		}
	}
	took := time.Since(start)
	died := die >= 0 && took >= die
	if s.trace != nil {
		s.trace.invocation(in.env, start, start.Add(took))
	}
	if s.lanes != nil {
		s.lanes.invocation(inv, q.Name, msgs, start, died)
		for i, r := range results {
			for _, j := range r.Jobs {
				s.lanes.result(inv, j)
			}
			if r.Err != nil && i < len(msgs) {
				s.lanes.failed(inv, q.Name, msgs[i], r.Err)
			}
		}
	}
	s.mu.Lock()
	s.stats.Invocations++
	s.stats.GBSeconds += s.sc.MemoryGB * math.Ceil(float64(took)/float64(time.Millisecond)) / 1000
	if died {
		s.stats.Deaths++
		bodies := make([]string, len(msgs))
		for i, m := range msgs {
			bodies[i] = m.Body
		}
		s.deaths.died(bodies)
	}
	if ictx.Err() != nil && !died && ctx.Err() == nil {
		s.stats.Timeouts++
	}
	var ok []*Message
	for i, r := range results {
		s.count(r)
		switch {
		case i >= len(msgs):
		case r.Err == nil:
			ok = append(ok, msgs[i])
		case retried[msgs[i].ID]:
			ok = append(ok, msgs[i])
			s.stats.RetriedChanges++
		default:
			s.stats.FailedMessages++
		}
	}
	s.mu.Unlock()
	if died {
		return // the environment is gone; its batch comes back after the visibility timeout
	}
	s.sqs.Delete(q, ok)
	s.release(in)
}

// count adds one message's result to the stats, under s.mu.
func (s *sim) count(r syncer.MessageResult) {
	if r.Change.Invalid != "" {
		s.stats.InvalidChanges++
	}
	for _, j := range r.Jobs {
		s.countBulk(j)
		s.stats.Outcomes[j.Outcome]++
		s.stats.Pushes += j.Pushes
		s.stats.Items += j.Items
		if j.WastedSlots > 0 {
			s.stats.Wasted += j.WastedSlots
			m := int(time.Since(s.start) / time.Minute)
			for len(s.stats.WastedByMinute) <= m {
				s.stats.WastedByMinute = append(s.stats.WastedByMinute, 0)
			}
			s.stats.WastedByMinute[m] += j.WastedSlots
			if s.stats.WastedByChannel == nil {
				s.stats.WastedByChannel = map[string]int{}
			}
			s.stats.WastedByChannel[j.Channel] += j.WastedSlots
		}
		if j.RevokedSlots > 0 {
			if s.stats.RevokedByChannel == nil {
				s.stats.RevokedByChannel = map[string]int{}
			}
			s.stats.RevokedByChannel[j.Channel] += j.RevokedSlots
		}
		s.stats.Throttled += j.Throttled
		s.stats.LocalShares += j.LocalShares
		if j.StoreError {
			s.stats.StoreErrors++
		}
	}
}

// sweepEvery invokes the function's sweep on the stack's schedule.
func (s *sim) sweepEvery(ctx context.Context) {
	for sleep(ctx, s.sc.SweepEvery) == nil {
		in, err := s.acquire()
		if err != nil {
			panic(err)
		}
		start := time.Now()
		sctx, cancel := context.WithTimeout(ctx, functionTimeout)
		rep, _ := in.sy.Sweep(sctx)
		cancel()
		if s.trace != nil {
			s.trace.invocation(in.env, start, time.Now())
		}
		s.mu.Lock()
		s.stats.Sweeps++
		s.stats.SweptItems += rep.Items
		s.stats.SweptLanes += rep.Lanes
		s.stats.Invocations++
		s.stats.GBSeconds += s.sc.MemoryGB * time.Since(start).Seconds()
		s.count(syncer.MessageResult{Jobs: rep.Results})
		s.mu.Unlock()
		if s.lanes != nil {
			for _, j := range rep.Results {
				s.lanes.result(-1, j)
			}
		}
		s.release(in)
	}
}

// finalSweep runs the function's sweep once more after the drain: with
// every lane fresh and the queues empty it must find no lane to push.
func (s *sim) finalSweep(ctx context.Context) {
	in, err := s.acquire()
	if err != nil {
		panic(err)
	}
	sctx, cancel := context.WithTimeout(ctx, functionTimeout)
	rep, _ := in.sy.Sweep(sctx)
	cancel()
	s.mu.Lock()
	s.count(syncer.MessageResult{Jobs: rep.Results})
	s.finalSwept = len(rep.Results)
	s.mu.Unlock()
	s.release(in)
}

// sample records the dirty lanes and the quota-bound floor.
func (s *sim) sample(ctx context.Context) {
	// The ledger's copies are per connection; a copy's bucket is its
	// channel's (copies of one property on a channel share it: the floor
	// is then a little low).
	credOf := func(ch int, prop int32) int32 { return prop % int32(s.sc.Channels[s.copyOf[ch]].Creds) }
	for sleep(ctx, sampleEvery) == nil {
		// The quota is what the vendor enforces: a halved limit doubles
		// the floor, whether or not the fleet has learned it yet.
		halved := s.sc.Faults.HalveAt > 0 && time.Since(s.start) >= s.sc.Faults.HalveAt
		rate := func(ch int) float64 {
			ch = s.copyOf[ch]
			if halved && ch == s.sc.Faults.HalveChannel {
				return s.sc.Channels[ch].Rate / 2
			}
			return s.sc.Channels[ch].Rate
		}
		floor, dirty := s.ledger.Floor(credOf, rate)
		sm := Sample{At: time.Since(s.start), DirtyLanes: dirty, Floor: floor,
			Backlog: s.sqs.Pending(s.changes) + s.sqs.Pending(s.defers)}
		s.mem.sample()
		s.mu.Lock()
		s.samples = append(s.samples, sm)
		changes, invocations := s.stats.Changes, s.stats.Invocations
		s.mu.Unlock()
		if s.progress != nil && sm.At%time.Minute < sampleEvery {
			fmt.Fprintf(s.progress, "sim %s: %v simulated, %d changes, %d invocations, %d dirty lanes, backlog %d, floor %v, peak heap %d MiB\n",
				s.sc.Name, sm.At.Round(time.Second), changes, invocations, dirty, sm.Backlog, floor.Round(time.Millisecond), s.mem.peak>>20)
		}
	}
}

// scheduleFaults arms the scenario's faults on the bubble's clock.
func (s *sim) scheduleFaults() {
	f := s.sc.Faults
	if f.DBOutage[1] > f.DBOutage[0] {
		from, to := s.start.Add(f.DBOutage[0]), s.start.Add(f.DBOutage[1])
		s.db.SetOutage(func(t time.Time) bool { return !t.Before(from) && t.Before(to) })
	}
	if f.LimiterOutage[1] > f.LimiterOutage[0] {
		from, to := s.start.Add(f.LimiterOutage[0]), s.start.Add(f.LimiterOutage[1])
		s.db.SetTableOutage("limits", func(t time.Time) bool { return !t.Before(from) && t.Before(to) })
	}
	if f.Vendor5xx[1] > f.Vendor5xx[0] {
		from, to := s.start.Add(f.Vendor5xx[0]), s.start.Add(f.Vendor5xx[1])
		s.vendors[f.Vendor5xxChannel].Set5xx(func(t time.Time) bool { return !t.Before(from) && t.Before(to) })
	}
	if f.SlowStore[1] > f.SlowStore[0] {
		from, to := s.start.Add(f.SlowStore[0]), s.start.Add(f.SlowStore[1])
		s.db.slow, s.db.slowShare, s.db.slowLatency, s.db.slowCap = func(t time.Time) bool { return !t.Before(from) && t.Before(to) }, f.SlowShare, f.SlowLatency, f.SlowCap
	}
	if f.HalveAt > 0 {
		c := s.sc.Channels[f.HalveChannel]
		v := s.vendors[f.HalveChannel]
		time.AfterFunc(f.HalveAt, func() { v.SetReal(window.Limit{Rate: c.Rate / 2, Burst: max(c.Burst/2, 1)}) })
	}
}

// change is one PMS change.
type change struct {
	prop             int32
	kind, room, plan int
	from, days       int
	value            int32
	urgent           bool
}

// produce plays the PMS: the load's changes, as a Poisson stream at its
// rate, and the burst's wave; it returns when both are sent.
func (s *sim) produce(ctx context.Context) {
	var wg sync.WaitGroup
	if b := s.sc.Burst; b != nil {
		br := rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64()))
		wg.Go(func() { s.wave(ctx, *b, br) })
	}
	for i, bk := range s.sc.Bulks {
		// Drawn apart from the load's stream, which stays as it was.
		br := rand.New(rand.NewPCG(s.sc.Seed, 0xb01c+uint64(i)))
		wg.Go(func() { s.bulk(ctx, bk, br) })
	}
	if w := s.sc.Reprice; w != nil {
		br := rand.New(rand.NewPCG(s.sc.Seed, 0x5e11))
		wg.Go(func() { s.reprice(ctx, *w, br) })
	}
	if len(s.sc.ConnEvents) > 0 {
		wg.Go(func() { s.connEvents(ctx) })
	}
	if w := s.sc.Busy; w != nil {
		br := rand.New(rand.NewPCG(s.sc.Seed, 0xb005))
		wg.Go(func() { s.busyStretch(ctx, *w, br) })
	}
	if o := s.sc.Onboard; o != nil {
		wg.Go(func() { s.resyncOnboard(ctx, *o) })
	}
	l := s.sc.Load
	for ctx.Err() == nil {
		at := time.Since(s.start)
		if at >= l.Duration {
			break
		}
		rate := l.Rate(at)
		gap := time.Duration(s.rng.ExpFloat64() / rate * float64(time.Second))
		if sleep(ctx, gap) != nil {
			break
		}
		prop := int32(s.rng.IntN(s.sc.Properties))
		if h := s.sc.HotProperty; h > 0 && s.rng.Float64() < h {
			prop = 0
		}
		c := change{prop: prop, kind: pick(s.rng, l.Kinds), room: s.rng.IntN(l.Rooms), plan: s.rng.IntN(l.Plans),
			days: 1 + s.rng.IntN(l.MaxDays), value: int32(1 + s.rng.IntN(500))}
		c.from = s.rng.IntN(l.WithinDays - c.days + 1)
		s.send(c)
	}
	wg.Wait()
}

// wave sends the burst: every room-rate of b.Properties properties gets
// b.Ranges ranges of b.RangeDays days, evenly over b.Over, plus urgent
// stop-sells meanwhile.
func (s *sim) wave(ctx context.Context, b Burst, r *rand.Rand) {
	if sleep(ctx, b.At) != nil {
		return
	}
	var all []change
	for p := range b.Properties {
		for room := range b.Rooms {
			for plan := range b.Plans {
				for i := range b.Ranges {
					all = append(all, change{prop: int32(p), kind: 1, room: room, plan: plan, from: i * b.RangeDays, days: b.RangeDays, value: int32(1 + r.IntN(500))})
				}
			}
		}
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	gap := b.Over / time.Duration(len(all))
	nextStop := time.Duration(0)
	began := time.Now()
	for _, c := range all {
		if ctx.Err() != nil {
			return
		}
		s.send(c)
		if b.StopSellsPerSecond > 0 && time.Since(began) >= nextStop {
			nextStop += time.Duration(float64(time.Second) / b.StopSellsPerSecond)
			s.send(change{prop: int32(r.IntN(b.Properties)), kind: 0, room: r.IntN(b.Rooms), plan: 0, from: r.IntN(60), days: 1 + r.IntN(3), value: 0, urgent: true})
		}
		_ = sleep(ctx, gap)
	}
}

func pick(r *rand.Rand, w [3]float64) int {
	x := r.Float64() * (w[0] + w[1] + w[2])
	for i, v := range w {
		if x < v {
			return i
		}
		x -= v
	}
	return 2
}

// send numbers a change in its property's sequence, records it in the
// ledger and puts it on the changes queue as the PMS's EventBridge event.
func (s *sim) send(c change) {
	s.mu.Lock()
	s.seq[c.prop]++
	seq := s.seq[c.prop]
	s.stats.Changes++
	for _, ch := range s.sc.Channels {
		if indexOf(ch.Kinds, kindNames[c.kind]) >= 0 {
			s.stats.FannedOut++
		}
	}
	if c.urgent {
		s.stats.StopSells++
	}
	n := s.stats.Changes
	s.mu.Unlock()
	from := day0.AddDate(0, 0, c.from)
	values := s.changeValues(&c)
	ch := ari.Change{EventID: fmt.Sprintf("ev-%d", n), PropertyID: propID(int(c.prop)), Sequence: seq, Kind: kindNames[c.kind],
		RoomType: roomNames[c.room], RatePlan: planName(c.plan), From: from.Format(ari.DateLayout),
		To: from.AddDate(0, 0, c.days-1).Format(ari.DateLayout), Values: values}
	detail, _ := json.Marshal(ch)
	body := fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"ARI change","source":"pms","time":%q,"detail":%s}`,
		ch.EventID, time.Now().UTC().Format(time.RFC3339), detail)
	// Only channels with the kind's endpoint hold the cell; the ledger
	// tracks every channel, so a kind a channel lacks is published only
	// where it is pushed.
	if s.lanes != nil {
		s.lanes.add(laneName(propID(int(c.prop)), kindNames[c.kind]), "C seq %d %s %s/%s %s+%d", seq, ch.EventID, ch.RoomType, ch.RatePlan, ch.From, c.days)
	}
	s.ledger.Publish(rowKey{prop: c.prop, kind: uint8(c.kind), room: uint8(c.room), plan: uint8(max(c.plan, 0))}, c.from, c.days, int32(seq), c.value)
	s.sqs.Put(s.changes, body)
}

// oldRelease is sc as the release before leased shares runs it: no
// endpoint has a "share".
func oldRelease(sc Scenario) Scenario {
	old := cloneScenario(sc)
	old.Share = ""
	for i := range old.Channels {
		c := &old.Channels[i]
		delete(c.Keys, "share")
		for _, kk := range c.KindKeys {
			delete(kk, "share")
		}
	}
	return old
}
