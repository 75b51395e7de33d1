package sim

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	connstore "github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
)

// Prices are on-demand list prices (us-east-1) the report uses, and
// provisioned capacity's per unit-hour for the line stated apart.
var Prices = struct {
	WRU, RRU, SQS, LambdaRequest, LambdaGBs, EventBridge float64
	WCUHour, RCUHour                                     float64
}{
	WRU: 0.625e-6, RRU: 0.125e-6, SQS: 0.40e-6, LambdaRequest: 0.20e-6, LambdaGBs: 0.0000133334, EventBridge: 1.00e-6,
	WCUHour: 0.00065, RCUHour: 0.00013,
}

// provisionedUse is the utilization DynamoDB auto scaling targets by
// default: provisioned capacity pays for the units a run used divided by it.
const provisionedUse = 0.70

// idlePollsPerMinute is what an event source mapping's pollers bill while
// a queue is empty: about five pollers long-polling 20 s each.
const idlePollsPerMinute = 5 * 3

// Report is one run's figures and the invariants it broke.
type Report struct {
	lanes *laneTrace // Scenario.TraceLanes
	// Shares sums every environment's leases (limiter.ShareStats).
	Shares                                limiter.ShareStats
	Scenario                              Scenario
	Stats                                 Stats
	DB                                    DBStats
	SQSReqs                               int
	SQSByCall                             map[string]int
	Simulated                             time.Duration
	Requests, Accepted, Throttled, Failed int
	HotKey                                string
	HotWrites, HotWCU, HotTotal           int
	Fresh                                 Hist
	FreshByMinute                         []*Hist
	Urgent                                Hist
	Samples                               []Sample
	DeadByReason                          map[string]int
	Stale                                 int
	// WentBack counts days an older state overwrote on an OTA (a violation).
	WentBack         int
	StaleExamples    []string
	Violations       []string
	WindowViolations int
	// StrictExceedances are sends over burst + rate·W but within the
	// limiter's documented rate·λ; Strict describes the first of each vendor.
	StrictExceedances        int
	Strict                   []string
	PerChannel               []string
	PendingAtEnd, DirtyAtEnd int
	// LaneItems are the lane items as the store holds them at the end of a
	// run that left lanes dirty (laneitems.go).
	LaneItems []string
	// Recovery says, per fault, how long after it ended the dirty lanes
	// fell back to their level before the first fault.
	Recovery []string
	// HalvedThrottles are the 429s the halving OTA answered from the
	// halving on (Faults.HalveAt).
	HalvedThrottles int
	// Storm describes the wave's drain against the quota.
	Storm string
	// Parity is what the parity checks and hand edits did, if any.
	Parity *ParityReport
	// OnboardFresh is how long after they were stored the onboarding
	// hotels' days reached each OTA, and OnboardLast when the last did.
	OnboardFresh Hist
	OnboardLast  time.Duration
	// Arrivals are the requests each bucket ("vendor/key") met, from the
	// run's start, with the job that sent each (Vendor.Arrivals).
	Arrivals map[string][]arrival
}

func (s *sim) report() *Report {
	r := &Report{Scenario: s.sc, Stats: s.stats, DB: s.db.Stats(), Simulated: s.stats.EndedAt, DeadByReason: map[string]int{}}
	s.mu.Lock()
	r.Stats.DeathGrace, r.Stats.DeathLane, r.Stats.DeathsOfLane = s.deaths.grace(visibility), s.deaths.lane, s.deaths.most
	r.Samples = append([]Sample(nil), s.samples...)
	s.mu.Unlock()
	minutes := s.stats.EndedAt.Minutes()
	r.SQSReqs = s.sqs.Requests + int(2*idlePollsPerMinute*minutes)
	s.sqs.mu.Lock()
	r.SQSByCall = map[string]int{"idle long polls (modeled)": int(2 * idlePollsPerMinute * minutes)}
	for k, n := range s.sqs.ByCall {
		r.SQSByCall[k] = n
	}
	s.sqs.mu.Unlock()
	r.HotKey, r.HotWrites, r.HotWCU, r.HotTotal = s.db.Hottest()
	s.mu.Lock()
	for _, in := range s.all {
		st := in.p.Limiter.ShareStats()
		r.Shares.Leases += st.Leases
		r.Shares.LeasedTokens += st.LeasedTokens
		r.Shares.Local += st.Local
		r.Shares.Misses = addCounts(r.Shares.Misses, st.Misses)
		r.Shares.Writes = addCounts(r.Shares.Writes, st.Writes)
		r.Shares.Failed = addCounts(r.Shares.Failed, st.Failed)
	}
	s.mu.Unlock()
	for _, v := range s.vendors {
		v.mu.Lock()
		r.addArrivals(v, s.start)
		r.Requests += v.Sent
		r.Accepted += v.Accepted
		r.Throttled += v.Throttled
		r.Failed += v.Failed
		r.WindowViolations += v.Violations
		r.StrictExceedances += v.Strict
		if v.Violations > 0 {
			r.Violations = append(r.Violations, fmt.Sprintf("vendor window: %d sends over burst + rate·(W + λ); first: %s", v.Violations, v.FirstViolation))
		}
		if v.InFlightOver > 0 {
			r.Violations = append(r.Violations, fmt.Sprintf("in flight: %d sends past max_in_flight; first: %s", v.InFlightOver, v.FirstInFlight))
		}
		// An overrun comes before the silence a 429 it drew asked for: a
		// shrink keeps the first kind of failure, the cause.
		if v.QuotaOver > 0 {
			r.Violations = append(r.Violations, fmt.Sprintf("quota: %d sends past the calendar quota; first: %s", v.QuotaOver, v.FirstQuota))
		}
		if v.Early > 0 {
			r.Violations = append(r.Violations, fmt.Sprintf("retry-after: %d requests inside the silence a 429 asked for; first: %s", v.Early, v.FirstEarly))
		}
		if v.Strict > 0 {
			r.Strict = append(r.Strict, fmt.Sprintf("%d sends over burst + rate·W (within rate·λ); first: %s", v.Strict, v.FirstStrict))
		}
		busiest, bk := 0, ""
		for k, n := range v.ByKey {
			if n > busiest || n == busiest && k < bk {
				busiest, bk = n, k
			}
		}
		r.PerChannel = append(r.PerChannel, fmt.Sprintf("%s: %d sent, %d accepted, %d 429, %d 5xx, %d wasted slots, %d revoked slots, busiest bucket %s %d (%.1f/s)",
			v.Name, v.Sent, v.Accepted, v.Throttled, v.Failed, s.stats.WastedByChannel[v.Name], s.stats.RevokedByChannel[v.Name], bk, busiest, float64(busiest)/s.stats.EndedAt.Seconds())+v.wireLine())
		v.mu.Unlock()
	}
	s.ledger.mu.Lock()
	r.FreshByMinute = s.ledger.Fresh
	r.OnboardFresh, r.OnboardLast = s.ledger.Onboard, s.ledger.OnboardLast
	for _, h := range s.ledger.Fresh {
		r.Fresh.Merge(h)
	}
	r.Urgent.Merge(&s.ledger.Urgent)
	s.ledger.mu.Unlock()
	for _, m := range s.sqs.DeadLetters() {
		reason := reasonOf(m)
		if reason == "" {
			r.Violations = append(r.Violations, fmt.Sprintf("dead letter %s has no reason: %.200s", m.ID, m.Body))
			reason = "(none)"
		}
		r.DeadByReason[shortReason(reason)]++
	}
	r.Recovery = recovery(s.sc.Faults, r.Samples)
	if f := s.sc.Faults; f.HalveAt > 0 {
		line, throttles := s.halved(f.HalveChannel, f.HalveAt)
		r.Recovery, r.HalvedThrottles = append(r.Recovery, line), throttles
	}
	if b := s.sc.Burst; b != nil {
		r.Storm = s.stormDrain(*b, r.Samples)
	}
	s.wireCheck(r)
	s.parityCheck(r)
	s.connCheck(r)
	r.Stale, r.StaleExamples = s.ledger.Stale(5)
	if len(s.sc.ConnEvents) > 0 {
		r.Recovery = append(r.Recovery, fmt.Sprintf("connections: %d OTA days left stale as a disable or an unmapped code allows (dropped, or named by a dead letter)", s.ledger.Excused))
	}
	if r.Stale > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("stale: %d OTA days differ from the newest PMS value, e.g. %s", r.Stale, strings.Join(r.StaleExamples, "; ")))
	}
	if r.WentBack = s.ledger.WentBack; r.WentBack > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("an older state overwrote a newer one on an OTA: %d days, first %s", r.WentBack, s.ledger.WentBackExample))
	}
	if n := s.db.LaneWentBack; n > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("an older state over a newer one in a lane: %d writes replaced a lane's pending set with an older change for a date it still holds; first %s", n, s.db.FirstLaneWentBack))
	}
	r.PendingAtEnd = s.sqs.Pending(s.changes) + s.sqs.Pending(s.defers)
	dirty := s.ledger.DirtyByProp()
	r.DirtyAtEnd = len(dirty)
	if r.PendingAtEnd > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("jobs that never end: %d messages still on the changes and deferred queues %v after the load", r.PendingAtEnd, s.drainTime()))
	}
	if s.finalSwept > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("the sweep after the drain found %d lanes to push", s.finalSwept))
	}
	if s.stats.Timeouts > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("jobs that never end: %d invocations ran into the function timeout", s.stats.Timeouts))
	}
	if len(r.Violations) > 0 && (len(dirty) > 0 || r.PendingAtEnd > 0) {
		r.LaneItems = s.laneItems(dirty)
	}
	return r
}

// shortReason groups reasons that differ only in ids.
func shortReason(s string) string {
	if i := strings.IndexAny(s, "\"'"); i > 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return strings.TrimSpace(s)
}

func per(n, d float64) float64 {
	if d == 0 {
		return 0
	}
	return n / d
}

// Cost is dollars per million changes, by service. DynamoDBProvisioned is
// DynamoDB's at provisioned capacity instead of on demand, for a load auto
// scaling can follow (a day's curve, not a storm's minute): stated apart.
type Cost struct{ DynamoDB, SQS, Lambda, EventBridge, DynamoDBProvisioned float64 }

// Total is DynamoDB + SQS + Lambda (EventBridge apart).
func (c Cost) Total() float64 { return c.DynamoDB + c.SQS + c.Lambda }

// ConnectionReads are the Queries of the connections table and the read
// units they were billed (included in the DynamoDB cost).
func (r *Report) ConnectionReads() (reads int, rcu float64) {
	for where, site := range r.DB.Sites {
		if strings.HasPrefix(where, connectionsTable+" Query ") {
			reads, rcu = reads+site.Calls, rcu+site.RCU
		}
	}
	return reads, rcu
}

// Cost prices the run per million changes.
func (r *Report) Cost() Cost {
	ch := float64(r.Stats.Changes)
	m := 1e6 / max(ch, 1)
	return Cost{
		DynamoDB:    m * (r.DB.WCU*Prices.WRU + r.DB.RCU*Prices.RRU),
		SQS:         m * float64(r.SQSReqs) * Prices.SQS,
		Lambda:      m * (float64(r.Stats.Invocations)*Prices.LambdaRequest + r.Stats.GBSeconds*Prices.LambdaGBs),
		EventBridge: m * ch * Prices.EventBridge,
		// A unit a second for an hour serves 3,600 units.
		DynamoDBProvisioned: m * (r.DB.WCU*Prices.WCUHour + r.DB.RCU*Prices.RCUHour) / 3600 / provisionedUse,
	}
}

// LimiterWrites are the limiter table's writes (every call but its
// reads) and those of them whose condition failed: a guess of the
// bucket's state that another writer had changed.
func (r *Report) LimiterWrites() (writes, failed int) {
	for where, site := range r.DB.Sites {
		f := strings.Fields(where)
		if len(f) < 2 || f[0] != "limits" || f[1] == "GetItem" || f[1] == "BatchGetItem" || f[1] == "Query" {
			continue
		}
		writes, failed = writes+site.Calls, failed+site.Conditional
	}
	return writes, failed
}

// DBCalls is every DynamoDB call, and the limiter table's.
func (r *Report) DBCalls() (all, limiter int) {
	for k, n := range r.DB.Calls {
		all += n
		if strings.HasPrefix(k, "limits ") {
			limiter += n
		}
	}
	return all, limiter
}

// Write prints the report.
func (r *Report) Write(w io.Writer) {
	st := r.Stats
	ch := float64(st.Changes)
	all, lim := r.DBCalls()
	c := r.Cost()
	fmt.Fprintf(w, "sim %s (seed %d), simulated: %s\n", r.Scenario.Name, r.Scenario.Seed, r.Scenario.Note)
	fmt.Fprintf(w, "  simulated %v (load %v, drained by %v); latencies: DynamoDB p50 %v p99 %v, SQS p50 %v p99 %v, OTA p50 %v p99 %v (log-normal)\n",
		r.Simulated.Round(time.Second), r.Scenario.Load.Duration, st.EndedAt.Round(time.Second), r.Scenario.DBLatency.P50, r.Scenario.DBLatency.P99,
		r.Scenario.SQSLatency.P50, r.Scenario.SQSLatency.P99, r.Scenario.OTALatency.P50, r.Scenario.OTALatency.P99)
	if st.DeathGrace > 0 {
		fmt.Fprintf(w, "  the drain's grace for deaths: %v (%s met %d of the %d deaths, a visibility timeout each)\n", st.DeathGrace, st.DeathLane, st.DeathsOfLane, st.Deaths)
	}
	if sv := r.Scenario.DBServe; sv > 0 {
		fmt.Fprintf(w, "  DynamoDB is one server at %v a call, first come first served: its %d calls kept it busy %v\n", sv, all, time.Duration(all)*sv)
	}
	fmt.Fprintf(w, "  changes %d (%d stop-sells), fanned out to %d (change, endpoint) pairs\n", st.Changes, st.StopSells, st.FannedOut)
	fmt.Fprintf(w, "  OTA requests %d: %.3f per change, %.3f per fanned-out change; items per push %.1f; wasted slots %d; 429s %d; 5xx %d\n",
		r.Requests, per(float64(r.Requests), ch), per(float64(r.Requests), float64(st.FannedOut)), per(float64(st.Items), float64(st.Pushes)), st.Wasted, r.Throttled, r.Failed)
	if sh := r.Shares; sh.Leases > 0 || r.Scenario.Share != "" {
		unused := sh.LeasedTokens - sh.Local
		set := r.Scenario.Share
		if set == "" {
			set = "(the channels' own)"
		}
		fmt.Fprintf(w, "  leased shares %s: %d leases, %d pushes granted by a lease with no write (%.3f per push); quota leases held and no push used: %d tokens, %.0f a minute\n",
			set, sh.Leases, sh.Local, per(float64(sh.Local), float64(st.Pushes)), unused, per(float64(unused), r.Simulated.Minutes()))
		fmt.Fprintf(w, "    requests no lease granted, by why (a share of pushes): %s\n", countsPer(sh.Misses, float64(st.Pushes)))
		fmt.Fprintf(w, "    share-aware limiter writes that landed, by form (a share of pushes): %s\n", countsPer(sh.Writes, float64(st.Pushes)))
		fmt.Fprintf(w, "    share-aware limiter writes whose condition failed, by what the item showed (a share of pushes): %s\n", countsPer(sh.Failed, float64(st.Pushes)))
	}
	fmt.Fprintf(w, "  DynamoDB calls %d: %.2f per change (limiter %.2f, state and lanes %.2f); WCU %.0f (%.2f per change), RCU %.0f (%.2f per change); conditional failures %d, outage errors %d, other errors %d, items refused over 400 KB %d\n",
		all, per(float64(all), ch), per(float64(lim), ch), per(float64(all-lim), ch), r.DB.WCU, per(r.DB.WCU, ch), r.DB.RCU, per(r.DB.RCU, ch),
		r.DB.Conditional, r.DB.Failed, r.DB.Unexpected, r.DB.TooLarge)
	var ops []string
	for k, n := range r.DB.Calls {
		ops = append(ops, fmt.Sprintf("%s %.2f (%.2f WCU)", k, per(float64(n), ch), per(r.DB.WCUByOp[k], ch)))
	}
	sort.Strings(ops)
	fmt.Fprintf(w, "    per change by table and call: %s\n", strings.Join(ops, ", "))
	lw, lf := r.LimiterWrites()
	fmt.Fprintf(w, "    limiter writes %d: %.3f per push, %.2f per change; failed conditional writes (guesses of a bucket another writer changed) %.3f per change\n",
		lw, per(float64(lw), float64(st.Pushes)), per(float64(lw), ch), per(float64(lf), ch))
	if r.Scenario.StoredConnections {
		reads, rcu := r.ConnectionReads()
		fmt.Fprintf(w, "    connections read from the store (each environment's cache, %v): %d Queries, %.4f per change, %.0f RCU, $%.4f per million changes\n",
			connstore.DefaultMaxAge, reads, per(float64(reads), ch), rcu, 1e6*per(rcu*Prices.RRU, ch))
	}
	if len(r.DB.FirstErrors) > 0 {
		fmt.Fprintf(w, "    first other errors: %s\n", strings.Join(r.DB.FirstErrors, " | "))
	}
	fmt.Fprintf(w, "  SQS requests %d (%.3f per change, incl. modeled idle long polls); Lambda invocations %d (%.4f per change, %d cold, %d died, %d timed out), GB-s %.1f (%.5f per change)\n",
		r.SQSReqs, per(float64(r.SQSReqs), ch), st.Invocations, per(float64(st.Invocations), ch), st.Cold, st.Deaths, st.Timeouts, st.GBSeconds, per(st.GBSeconds, ch))
	fmt.Fprintf(w, "  $ per million changes: DynamoDB %.3f + SQS %.3f + Lambda %.3f = %.3f (EventBridge apart: %.2f)\n",
		c.DynamoDB, c.SQS, c.Lambda, c.Total(), c.EventBridge)
	fmt.Fprintf(w, "    apart: at provisioned capacity ($%g per WCU-hour, $%g per RCU-hour, auto scaling holding %.0f%% utilization) DynamoDB %.3f, so %.3f all-in\n",
		Prices.WCUHour, Prices.RCUHour, 100*provisionedUse, c.DynamoDBProvisioned, c.DynamoDBProvisioned+c.SQS+c.Lambda)
	r.writeBreakdown(w)
	fmt.Fprintf(w, "  hottest item %s: %d writes and %d WCU in its busiest second (%.0f%% of a partition's 1,000 WCU/s), %d writes in all\n",
		r.HotKey, r.HotWrites, r.HotWCU, 100*float64(r.HotWCU)/1000, r.HotTotal)
	fmt.Fprintf(w, "  freshness (a day's newest value → OTA): p50 %v, p99 %v, max %v over %d days; stop-sells p50 %v p99 %v over %d\n",
		ms(r.Fresh.Quantile(0.5)), ms(r.Fresh.Quantile(0.99)), ms(r.Fresh.Max()), r.Fresh.N(), ms(r.Urgent.Quantile(0.5)), ms(r.Urgent.Quantile(0.99)), r.Urgent.N())
	r.writeOnboard(w)
	floor := time.Duration(0)
	for _, sm := range r.Samples {
		floor = max(floor, sm.Floor)
	}
	fmt.Fprintf(w, "  quota-bound floor (the fullest bucket's dirty lanes, in pushes of 500 days, ÷ its rate), max over the run: %v\n", floor.Round(time.Millisecond))
	for _, rec := range r.Recovery {
		fmt.Fprintf(w, "  recovery: %s\n", rec)
	}
	if r.Parity != nil {
		fmt.Fprintf(w, "  parity: %s\n", r.Parity)
	}
	if r.Storm != "" {
		fmt.Fprintf(w, "  storm: %s\n", r.Storm)
	}
	fmt.Fprintf(w, "  by minute (p50/p99/max freshness | max floor | max dirty lanes | max backlog | wasted slots):\n")
	for m, h := range r.FreshByMinute {
		var fl time.Duration
		dirty, backlog := 0, 0
		for _, sm := range r.Samples {
			if int(sm.At/time.Minute) == m {
				fl, dirty, backlog = max(fl, sm.Floor), max(dirty, sm.DirtyLanes), max(backlog, sm.Backlog)
			}
		}
		wasted := 0
		if m < len(st.WastedByMinute) {
			wasted = st.WastedByMinute[m]
		}
		if h.N() == 0 && dirty == 0 && wasted == 0 {
			continue
		}
		fmt.Fprintf(w, "    %3d' %10v %10v %10v | %8v | %6d | %6d | %6d\n", m, ms(h.Quantile(0.5)), ms(h.Quantile(0.99)), ms(h.Max()), ms(fl), dirty, backlog, wasted)
	}
	fmt.Fprintf(w, "  outcomes: pushed %d, deferred %d, coalesced %d, shed %d, dead-lettered %d, expired %d; store errors %d, local-share pushes %d, sweeps %d (items due %d, lanes taken over %d), invalid changes %d, messages left for redelivery %d, failed changes sent again after a backoff %d\n",
		st.Outcomes[dispatch.Pushed], st.Outcomes[dispatch.Deferred], st.Outcomes[dispatch.Coalesced], st.Outcomes[dispatch.Shed],
		st.Outcomes[dispatch.DeadLettered], st.Outcomes[dispatch.Expired], st.StoreErrors, st.LocalShares, st.Sweeps, st.SweptItems, st.SweptLanes, st.InvalidChanges, st.FailedMessages, st.RetriedChanges)
	reasons := make([]string, 0, len(r.DeadByReason))
	for k, n := range r.DeadByReason {
		reasons = append(reasons, fmt.Sprintf("%d × %s", n, k))
	}
	sort.Strings(reasons)
	fmt.Fprintf(w, "  dead letters by reason: %s\n", orNone(strings.Join(reasons, "; ")))
	for _, pc := range r.PerChannel {
		fmt.Fprintf(w, "  %s\n", pc)
	}
	fmt.Fprintf(w, "  stale %d, went back %d, violations %d (window %d); sends over burst + rate·W within the limiter's documented rate·λ: %d; at the end: %d messages pending, %d dirty lanes\n",
		r.Stale, r.WentBack, len(r.Violations), r.WindowViolations, r.StrictExceedances, r.PendingAtEnd, r.DirtyAtEnd)
	for _, s := range r.Strict {
		fmt.Fprintf(w, "    %s\n", s)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  VIOLATION (seed %d): %s\n", r.Scenario.Seed, v)
	}
	for _, l := range r.LaneItems {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// baseline is the most dirty lanes any sample in [from, to) saw.
func baseline(samples []Sample, from, to time.Duration) (int, bool) {
	n, ok := 0, false
	for _, sm := range samples {
		if sm.At >= from && sm.At < to {
			n, ok = max(n, sm.DirtyLanes), true
		}
	}
	return n, ok
}

// back is the first sample at or after t with at most base dirty lanes.
func back(samples []Sample, t time.Duration, base int) (time.Duration, bool) {
	for _, sm := range samples {
		if sm.At >= t && sm.DirtyLanes <= base {
			return sm.At, true
		}
	}
	return 0, false
}

func recovery(f Faults, samples []Sample) []string {
	type fault struct {
		name     string
		from, to time.Duration
	}
	var all []fault
	if f.DBOutage[1] > f.DBOutage[0] {
		all = append(all, fault{"DynamoDB outage", f.DBOutage[0], f.DBOutage[1]})
	}
	if f.LimiterOutage[1] > f.LimiterOutage[0] {
		all = append(all, fault{"limiter table outage", f.LimiterOutage[0], f.LimiterOutage[1]})
	}
	if f.Vendor5xx[1] > f.Vendor5xx[0] {
		all = append(all, fault{"OTA 5xx", f.Vendor5xx[0], f.Vendor5xx[1]})
	}
	if len(all) == 0 {
		return nil
	}
	base, ok := baseline(samples, min(time.Minute, all[0].from/2), all[0].from)
	if !ok {
		return nil
	}
	var out []string
	for _, ft := range all {
		worst, _ := baseline(samples, ft.from, ft.to+sampleEvery)
		if at, ok := back(samples, ft.to, base); ok {
			out = append(out, fmt.Sprintf("%s (%v–%v): dirty lanes peaked at %d, back to the pre-fault %d after %v", ft.name, ft.from, ft.to, worst, base, at-ft.to))
		} else {
			out = append(out, fmt.Sprintf("%s (%v–%v): dirty lanes not back to the pre-fault %d by the end", ft.name, ft.from, ft.to, base))
		}
	}
	return out
}

// halved says how the fleet took channel ch's real limit halving at at:
// the 429s it earned from then on and when the last came, and what its
// busiest bucket sent over the rest of the run against the halved rate.
// Dirty lanes say nothing here: the quota binds from then on, and the
// lanes merge what waits.
func (s *sim) halved(ch int, at time.Duration) (string, int) {
	c, v := s.sc.Channels[ch], s.vendors[ch]
	v.mu.Lock()
	var after []time.Duration
	for _, t := range v.ThrottledAt {
		if t >= at {
			after = append(after, t)
		}
	}
	keys := make([]string, 0, len(v.ByKey))
	for k := range v.ByKey {
		keys = append(keys, k)
	}
	v.mu.Unlock()
	end := s.stats.EndedAt
	busiest, bk := 0, ""
	for _, k := range keys {
		if n := v.SentBetween(k, at, end); n > busiest || n == busiest && k < bk {
			busiest, bk = n, k
		}
	}
	head := fmt.Sprintf("%s halves its real limit to %g/s at %v", c.Name, c.Rate/2, at)
	if c.Adaptive {
		head += " (its buckets adaptive)"
	}
	throttles := "no 429 after it"
	if len(after) > 0 {
		throttles = fmt.Sprintf("%d 429s after it, the first %v and the last %v after it", len(after), (after[0] - at).Round(time.Millisecond), (after[len(after)-1] - at).Round(time.Millisecond))
	}
	return fmt.Sprintf("%s: %s; its busiest bucket %s then sent %.2f/s", head, throttles, bk, float64(busiest)/max((end-at).Seconds(), 1e-9)), len(after)
}

// stormDrain measures the wave against channel 0's rates quota: how much of
// it each credential's bucket used while the wave arrived, and how long
// the backlog took to drain against the floor when the wave ended.
func (s *sim) stormDrain(b Burst, samples []Sample) string {
	c := s.sc.Channels[0]
	v := s.vendors[0]
	from, to := b.At+2*time.Second, b.At+b.Over
	minUse, maxUse := 2.0, 0.0
	for i := range c.Creds {
		key := fmt.Sprintf("token-TOKEN_%s_%d/rates", strings.ToUpper(c.Name), i)
		use := float64(v.SentBetween(key, from, to)) / (c.Rate * (to - from).Seconds())
		minUse, maxUse = min(minUse, use), max(maxUse, use)
	}
	// Drained once the quota-bound floor is back to where it was before
	// the wave: dirty lanes alone never are at a large fleet, whose
	// background load keeps about as many dirty as before the wave, a
	// few more or less from one sample to the next.
	var base, floor time.Duration
	for _, sm := range samples {
		if sm.At >= 10*time.Second && sm.At < b.At {
			base = max(base, sm.Floor)
		}
		if sm.At >= to && sm.At < to+sampleEvery {
			floor = sm.Floor
		}
	}
	end, ok := time.Duration(0), false
	for _, sm := range samples {
		if sm.At >= to && sm.Floor <= base {
			end, ok = sm.At, true
			break
		}
	}
	drained := "not drained by the end"
	if ok {
		drained = fmt.Sprintf("drained %v after the wave ended, against a floor of %v then (%.2f×)", end-to, floor, (end-to).Seconds()/max(floor.Seconds(), 1e-9))
	}
	return fmt.Sprintf("while the wave arrived (%v–%v) each %s rates bucket sent %.0f–%.0f%% of its quota (%g/s); %s",
		from, to, c.Name, 100*minUse, 100*maxUse, c.Rate, drained)
}

// addCounts adds b's counts to a's, making a if it is nil.
func addCounts(a, b map[string]int64) map[string]int64 {
	if a == nil && len(b) > 0 {
		a = make(map[string]int64)
	}
	for k, n := range b {
		a[k] += n
	}
	return a
}

// countsPer prints counts largest first, each with its count and its
// share of of.
func countsPer(m map[string]int64, of float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s %d (%.3f)", k, m[k], per(float64(m[k]), of))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}
