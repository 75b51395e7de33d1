// Command leasewhatif reads a push trace of test/sim
// (FLEETBUCKET_SIM_PUSH_TRACE, test/sim/trace.go) and estimates what the
// limiter's writes would be if each execution environment leased a share
// of a bucket's rate for L seconds with one write and granted its own
// pushes of that bucket locally until the lease ends. The idea is not
// built; this replays the pushes the run made, at the times it made them,
// against a model of the lease item. Analysis only.
//
//	go run ./test/sim/leasewhatif -trace /tmp/steady.trace [-rate 10 -burst 20 -backoff 1s]
//
// The model, per bucket (rate r, burst B), push by push in time order, for
// a push of environment e at t:
//
//   - e holds a live lease (share s, burst b_s, from t0): the push is
//     granted locally (no write) if it fits, else it books as today. Fits:
//     "count" policy, the lease's pushes so far ≤ b_s + s·L (what the lease
//     grants over its whole life, ignoring when); "paced" policy, ≤ b_s +
//     s·(t − t0) (a local GCRA that books instead of waiting).
//   - else e asks for a lease with one conditional write: s = r/(2·E_b),
//     b_s = max(1, ⌊B/(2·E_b)⌋), E_b the environments that pushed on the
//     bucket within the last L (e included). The item grants it unless the
//     bucket is busy (its tat > t) or the live shares plus s exceed r/2; a
//     grant takes b_s tokens (tat = t + b_s/r) and covers this push. A
//     refused ask still bills its write (DynamoDB bills a failed
//     conditional write), the push books as today, and e asks again no
//     sooner than backoff later.
//   - a push booked as today costs the run's own limiter writes per push
//     (guard retries and batch bookings included) and moves the item's tat
//     by 1/(r − live shares), the rate left to the rest of the fleet.
//
// The "ideal" rows drop the refusals (every ask is granted) to show the
// bound the brief's formula gives. The "informed" rows change two things
// a refused ask's answer (ALL_OLD) makes possible and the brief left open:
// E_b is the environments that pushed on any bucket within the last L (the
// fleet's, so a first comer does not take half the rate for itself), and
// a refused environment asks again once the bucket is idle (busy: at its
// tat) or a lease ends (shares: the earliest live one), not after a fixed
// backoff.
//
// -from counts only the pushes from then on (the model still runs from
// the start), to leave out the fleet's first minutes; changes are
// prorated by pushes.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// push is one OTA request: when (s from the run's start), which
// environment, which bucket.
type push struct {
	at     float64
	env    int
	bucket int
}

type span struct{ from, to float64 }

type trace struct {
	pushes             []push
	buckets            []string
	invocations        map[int][]span
	writesOK, writesCF int
	writesOther        int
	writeTimes         []float64 // every limiter write's
	changes            int
	loadEnd, ended     float64
}

func main() {
	path := flag.String("trace", "", "the push trace (FLEETBUCKET_SIM_PUSH_TRACE)")
	rate := flag.Float64("rate", 10, "every bucket's rate, requests/s (steady: 10)")
	burst := flag.Float64("burst", 20, "every bucket's burst (steady: 20)")
	backoff := flag.Duration("backoff", time.Second, "how long an environment whose lease was refused books per push before asking again")
	baseline := flag.Float64("dollars", 0, "the run's $ per million changes (the report's), to restate with the lease's limiter writes")
	slack := flag.Duration("busy", 0, "how far the item's tat may run ahead of now for a lease ask to pass (0: the brief's tat ≤ now)")
	from := flag.Duration("from", 0, "count only pushes from then on (simulated time from the run's start)")
	flag.Parse()
	if *path == "" {
		fmt.Fprintln(os.Stderr, "usage: leasewhatif -trace FILE [-rate 10 -burst 20 -backoff 1s -dollars 6.44]")
		os.Exit(2)
	}
	tr, err := read(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "leasewhatif:", err)
		os.Exit(1)
	}
	describe(tr)
	fmt.Println()
	whatIf(tr, *rate, *burst, backoff.Seconds(), slack.Seconds(), *baseline, from.Seconds())
}

func read(path string) (*trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := &trace{invocations: map[int][]span{}}
	ids := map[string]int{}
	sc := bufio.NewScanner(f)
	sec := func(s string) float64 { n, _ := strconv.ParseInt(s, 10, 64); return float64(n) / 1e6 }
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) >= 5 && fs[0] == "P":
			id, ok := ids[fs[3]]
			if !ok {
				id = len(tr.buckets)
				ids[fs[3]] = id
				tr.buckets = append(tr.buckets, fs[3])
			}
			env, _ := strconv.Atoi(fs[2])
			tr.pushes = append(tr.pushes, push{at: sec(fs[1]), env: env, bucket: id})
		case len(fs) == 5 && fs[0] == "W":
			tr.writeTimes = append(tr.writeTimes, sec(fs[1]))
			switch fs[4] {
			case "ok":
				tr.writesOK++
			case "cond":
				tr.writesCF++
			default:
				tr.writesOther++
			}
		case len(fs) == 4 && fs[0] == "I":
			env, _ := strconv.Atoi(fs[3])
			tr.invocations[env] = append(tr.invocations[env], span{sec(fs[1]), sec(fs[2])})
		case fs[0] == "D" || fs[0] == "R":
			// Deferrals and receives: not what this what-if replays.
		case len(fs) == 7 && fs[0] == "S":
			tr.changes, _ = strconv.Atoi(fs[2])
			tr.loadEnd, tr.ended = sec(fs[4]), sec(fs[6])
		default:
			return nil, fmt.Errorf("%s: a line I cannot read: %q", path, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if tr.changes == 0 {
		return nil, fmt.Errorf("%s: no totals line (S): was the run cut short?", path)
	}
	sort.SliceStable(tr.pushes, func(i, j int) bool { return tr.pushes[i].at < tr.pushes[j].at })
	for _, ss := range tr.invocations {
		sort.Slice(ss, func(i, j int) bool { return ss[i].from < ss[j].from })
	}
	return tr, nil
}

func (tr *trace) limiterWrites() int { return tr.writesOK + tr.writesCF + tr.writesOther }

// describe prints the fleet as the trace shows it: environments,
// concurrency, buckets' push rates, and how many pushes an environment
// makes on one bucket within L.
func describe(tr *trace) {
	n := float64(tr.changes)
	fmt.Printf("run: %d changes, load %.1f s, ended %.1f s; %d pushes (%.3f per change); limiter writes %d (%.3f per change, %.4f per push: %d ok, %d conditional failures, %d other)\n",
		tr.changes, tr.loadEnd, tr.ended, len(tr.pushes), float64(len(tr.pushes))/n, tr.limiterWrites(), float64(tr.limiterWrites())/n,
		float64(tr.limiterWrites())/float64(len(tr.pushes)), tr.writesOK, tr.writesCF, tr.writesOther)
	pushed := map[int]bool{}
	for _, p := range tr.pushes {
		pushed[p.env] = true
	}
	invs := 0
	for _, s := range tr.invocations {
		invs += len(s)
	}
	fmt.Printf("environments: %d distinct (%d of them pushed), %d invocations\n", len(tr.invocations), len(pushed), invs)
	byEnv := map[int]int{}
	for _, p := range tr.pushes {
		byEnv[p.env]++
	}
	var shares []string
	for env, c := range byEnv {
		shares = append(shares, fmt.Sprintf("%d:%.1f%%", env, 100*float64(c)/float64(len(tr.pushes))))
	}
	sort.Strings(shares)
	fmt.Printf("pushes by environment (id: share; ids in creation order): %s\n", strings.Join(shares, " "))
	mean, p50, p99, peak := concurrency(tr.invocations, 0, tr.loadEnd)
	fmt.Printf("concurrent invocations over the load (time-weighted): mean %.2f, p50 %d, p99 %d, max %d\n", mean, p50, p99, peak)

	perBucket := make([]int, len(tr.buckets))
	for _, p := range tr.pushes {
		perBucket[p.bucket]++
	}
	counts := append([]int(nil), perBucket...)
	sort.Ints(counts)
	busiest := 0
	for b, c := range perBucket {
		if c > perBucket[busiest] {
			busiest = b
		}
	}
	d := tr.ended
	fmt.Printf("buckets: %d; pushes per bucket per s over the run (%.1f s): mean %.2f, p50 %.2f, p99 %.2f, busiest %.2f (%s, %d pushes; its fullest 1 s %d, fullest 10 s %d)\n",
		len(tr.buckets), d, float64(len(tr.pushes))/float64(len(tr.buckets))/d, float64(pct(counts, 0.5))/d, float64(pct(counts, 0.99))/d,
		float64(perBucket[busiest])/d, tr.buckets[busiest], perBucket[busiest], fullest(tr, busiest, 1), fullest(tr, busiest, 10))

	fmt.Println("pushes of one environment on one bucket within L (fixed windows [kL, (k+1)L), over the (environment, bucket, window) with any):")
	fmt.Printf("  %5s %8s %6s %4s %4s %4s %5s %16s %12s %10s\n", "L", "windows", "mean", "p50", "p90", "p99", "max", "push-weighted", "share in ≥2", "E_b mean")
	for _, l := range leaseLengths {
		w := windows(tr, l)
		fmt.Printf("  %4.0fs %8d %6.2f %4d %4d %4d %5d %16.2f %11.1f%% %10.2f\n", l, len(w.counts), w.mean(), pct(w.counts, 0.5), pct(w.counts, 0.9),
			pct(w.counts, 0.99), w.counts[len(w.counts)-1], w.pushWeighted(), 100*w.shareAtLeast(2), w.envsPerBucket)
	}
}

var leaseLengths = []float64{10, 30, 60, 120}

// concurrency is the time-weighted mean, p50, p99 and max of the
// invocations in progress over [from, to).
func concurrency(inv map[int][]span, from, to float64) (mean float64, p50, p99, peak int) {
	type edge struct {
		at float64
		d  int
	}
	var es []edge
	for _, ss := range inv {
		for _, s := range ss {
			es = append(es, edge{s.from, +1}, edge{s.to, -1})
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].at < es[j].at || es[i].at == es[j].at && es[i].d < es[j].d })
	timeAt := map[int]float64{}
	level, last := 0, from
	for _, e := range es {
		a := math.Min(math.Max(e.at, from), to)
		timeAt[level] += a - last
		last = a
		level += e.d
		peak = max(peak, level)
	}
	timeAt[level] += to - last
	total := to - from
	levels := make([]int, 0, len(timeAt))
	for l, t := range timeAt {
		mean += float64(l) * t / total
		levels = append(levels, l)
	}
	sort.Ints(levels)
	acc := 0.0
	p50, p99 = -1, -1
	for _, l := range levels {
		acc += timeAt[l] / total
		if p50 < 0 && acc >= 0.5 {
			p50 = l
		}
		if p99 < 0 && acc >= 0.99 {
			p99 = l
		}
	}
	return mean, p50, p99, peak
}

// fullest is bucket b's most pushes within any window of w seconds.
func fullest(tr *trace, b int, w float64) int {
	var at []float64
	for _, p := range tr.pushes {
		if p.bucket == b {
			at = append(at, p.at)
		}
	}
	most, i := 0, 0
	for j := range at {
		for at[j]-at[i] >= w {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

type windowStats struct {
	counts        []int // sorted
	envsPerBucket float64
}

func (w windowStats) mean() float64 {
	return float64(sum(w.counts)) / float64(len(w.counts))
}

// pushWeighted is how many pushes the window of an average push holds.
func (w windowStats) pushWeighted() float64 {
	sq := 0
	for _, c := range w.counts {
		sq += c * c
	}
	return float64(sq) / float64(sum(w.counts))
}

func (w windowStats) shareAtLeast(k int) float64 {
	in := 0
	for _, c := range w.counts {
		if c >= k {
			in += c
		}
	}
	return float64(in) / float64(sum(w.counts))
}

func windows(tr *trace, l float64) windowStats {
	type cell struct{ env, bucket, k int }
	counts := map[cell]int{}
	type bk struct{ bucket, k int }
	envs := map[bk]int{}
	for _, p := range tr.pushes {
		c := cell{p.env, p.bucket, int(p.at / l)}
		if counts[c] == 0 {
			envs[bk{p.bucket, c.k}]++
		}
		counts[c]++
	}
	var w windowStats
	for _, n := range counts {
		w.counts = append(w.counts, n)
	}
	sort.Ints(w.counts)
	total := 0
	for _, n := range envs {
		total += n
	}
	w.envsPerBucket = float64(total) / float64(len(envs))
	return w
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func pct(sorted []int, q float64) int {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(math.Ceil(q*float64(len(sorted))))-1, len(sorted)-1)]
}

// model is one variant of the lease.
type model struct {
	name     string
	refuse   bool // the item refuses asks (busy, or shares over r/2)
	paced    bool // a lease grants b_s + s·(t − t0) by t, not b_s + s·L at once
	informed bool // E_b is the fleet's; a refused ask retries when the answer says it may pass
	spans    map[int][]span
	ended    float64
	slack    float64 // busy: tat > now + slack
	rate     float64
	burst    float64
	backoff  float64
}

// outcome counts what the fleet would write.
type outcome struct {
	leases, refused, booked, covered int
	refusedBusy, refusedShare        int
	// leased and frozen are share·seconds: every lease's share over its
	// life (within the run), and over the part of it its environment ran
	// no invocation (Lambda freezes an idle environment: its share sits
	// unused while no one else may take it).
	leased, frozen float64
}

// writes are the limiter writes: one per lease, one per refused ask, and
// per push booked as today, perBooking (the run's writes per push).
func (o outcome) writes(perBooking float64) float64 {
	return float64(o.leases+o.refused) + float64(o.booked)*perBooking
}

type lease struct {
	from, until float64
	share, bs   float64
	used        int
}

// bucketState is one bucket's item and its environments' leases.
type bucketState struct {
	tat      float64
	leases   map[int]*lease
	lastPush map[int]float64
	retryAt  map[int]float64
}

// run replays the pushes and counts those at or after from.
func (m model) run(tr *trace, l, from float64) outcome {
	var o, ignored outcome
	states := make([]*bucketState, len(tr.buckets))
	for i := range states {
		states[i] = &bucketState{leases: map[int]*lease{}, lastPush: map[int]float64{}, retryAt: map[int]float64{}}
	}
	fleet := map[int]float64{} // every environment's last push on any bucket
	for _, p := range tr.pushes {
		fleet[p.env] = p.at
		into := &o
		if p.at < from {
			into = &ignored
		}
		m.push(states[p.bucket], fleet, p, l, into)
	}
	return o
}

func (m model) push(st *bucketState, fleet map[int]float64, p push, l float64, o *outcome) {
	t := p.at
	st.lastPush[p.env] = t
	shares := 0.0
	for e, ls := range st.leases {
		if ls.until <= t {
			delete(st.leases, e)
			continue
		}
		shares += ls.share
	}
	if ls := st.leases[p.env]; ls != nil {
		granted := ls.bs + ls.share*l
		if m.paced {
			granted = ls.bs + ls.share*(t-ls.from)
		}
		if float64(ls.used+1) <= granted {
			ls.used++
			o.covered++
			return
		}
		m.book(st, t, shares, o)
		return
	}
	if t < st.retryAt[p.env] {
		m.book(st, t, shares, o)
		return
	}
	recent := st.lastPush
	if m.informed {
		recent = fleet
	}
	eb := 0
	for _, at := range recent {
		if at > t-l {
			eb++
		}
	}
	share := m.rate / (2 * float64(eb))
	bs := math.Max(1, math.Floor(m.burst/(2*float64(eb))))
	busy, over := st.tat > t+m.slack, shares+share > m.rate/2+1e-9
	if m.refuse && (busy || over) {
		o.refused++
		if busy {
			o.refusedBusy++
		} else {
			o.refusedShare++
		}
		st.retryAt[p.env] = t + m.backoff
		if m.informed {
			st.retryAt[p.env] = m.passesAt(st, busy, t)
		}
		m.book(st, t, shares, o)
		return
	}
	o.leases++
	o.covered++
	st.leases[p.env] = &lease{from: t, until: t + l, share: share, bs: bs, used: 1}
	life := math.Min(t+l, m.ended) - t
	o.leased += share * life
	o.frozen += share * (life - overlap(m.spans[p.env], t, t+life))
	st.tat = math.Max(st.tat, t) + bs/m.rate
}

// overlap is how long spans (sorted, disjoint) cover [from, to).
func overlap(spans []span, from, to float64) float64 {
	d := 0.0
	for _, s := range spans {
		if s.from >= to {
			break
		}
		d += math.Max(0, math.Min(s.to, to)-math.Max(s.from, from))
	}
	return d
}

// passesAt is when a refused ask could pass, as the refusal's ALL_OLD
// shows: the bucket idle, or the earliest live lease over.
func (m model) passesAt(st *bucketState, busy bool, t float64) float64 {
	if busy {
		return st.tat
	}
	at := math.Inf(1)
	for _, ls := range st.leases {
		if ls.until > t {
			at = math.Min(at, ls.until)
		}
	}
	return at
}

// book is a push booked on the item as today: the rest of the fleet runs
// at the rate the live leases leave.
func (m model) book(st *bucketState, t, shares float64, o *outcome) {
	o.booked++
	st.tat = math.Max(st.tat, t) + 1/math.Max(m.rate-shares, m.rate/2)
}

func whatIf(tr *trace, rate, burst, backoff, slack, dollars, from float64) {
	n := float64(tr.changes)
	perBooking := float64(tr.limiterWrites()) / float64(len(tr.pushes))
	const wcu = 0.625 // $ per million write request units, on-demand
	// The rest of the bill per change is the run's, window or not.
	rest := dollars - float64(tr.limiterWrites())/n*wcu
	today := float64(tr.limiterWrites()) / n
	if from > 0 {
		counted, writes := 0, 0
		for _, p := range tr.pushes {
			if p.at >= from {
				counted++
			}
		}
		for _, at := range tr.writeTimes {
			if at >= from {
				writes++
			}
		}
		n *= float64(counted) / float64(len(tr.pushes))
		today = float64(writes) / n
		fmt.Printf("counting the pushes from %.0f s on: %d, as many as %.0f changes; the limiter's writes in that span %d\n", from, counted, n, writes)
	}
	fmt.Printf("lease what-if (r %g/s, burst %g; s = r/(2·E_b), b_s = max(1, ⌊B/(2·E_b)⌋); a push booked as today costs %.4f writes, the run's average; refused asks retry after %v; busy: tat > now + %v)\n",
		rate, burst, perBooking, time.Duration(backoff*float64(time.Second)), time.Duration(slack*float64(time.Second)))
	fmt.Printf("today: %.3f limiter writes per change, $%.3f per million changes of them; the rest of the bill $%.3f\n", today, today*wcu, rest)
	models := []model{
		{name: "ideal (no refusals, count)", refuse: false},
		{name: "refusals, count", refuse: true},
		{name: "refusals, paced", refuse: true, paced: true},
		{name: "informed, count", refuse: true, informed: true},
		{name: "informed, paced", refuse: true, paced: true, informed: true},
	}
	fmt.Printf("  %4s  %-28s %8s %8s %8s %8s %8s %9s %11s %9s %9s %8s\n", "L", "model", "leases", "refused", "(busy)", "booked", "covered", "writes/ch", "+release/ch", "$/M lim.", "$/M all", "frozen")
	for _, l := range leaseLengths {
		for _, m := range models {
			m.rate, m.burst, m.backoff, m.slack, m.spans, m.ended = rate, burst, backoff, slack, tr.invocations, tr.ended
			o := m.run(tr, l, from)
			w := o.writes(perBooking) / n
			withRelease := w + float64(o.leases)/n
			all := "-"
			if dollars > 0 {
				all = fmt.Sprintf("%.3f", rest+w*wcu)
			}
			frozen := "-"
			if o.leased > 0 {
				frozen = fmt.Sprintf("%.0f%%", 100*o.frozen/o.leased)
			}
			fmt.Printf("  %3.0fs  %-28s %8d %8d %8d %8d %8d %9.3f %11.3f %9.3f %9s %8s\n", l, m.name, o.leases, o.refused, o.refusedBusy, o.booked, o.covered, w, withRelease, w*wcu, all, frozen)
		}
	}
}
