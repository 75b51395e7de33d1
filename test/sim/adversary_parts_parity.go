package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/parity"
	"github.com/fleetbucket/fleetbucket/test/otaformat"
)

// Parity under the adversary: hoteliers edit an expedia-ar vendor's copy
// by hand while the load runs, and the real parity.Checker, wired as
// functions/sync wires a parity event, reads the vendor's copy back on a
// schedule through the channel's read bucket and repairs what drifted.
// The vendor answers the reads from its copy (the ledger's held rows)
// with test/otaformat's model of Expedia's PARR, which shares no code
// with sdk/pipeline/format, and meters them on their own window.
//
// Invariants (parityCheck), beside every other one Run checks:
//   - every day is newest at the OTA at the end (the ledger's stale
//     check), hand edits included, except a day whose last hand edit came
//     after the last check of its connection that read the OTA whole had
//     begun, and that the OTA still holds as edited: no check could have
//     seen it. Every other edit is repaired by the next check and the
//     pushes its repair wakes: an edit leaves its lane behind (the ledger
//     no longer holds a published sequence), so the drain waits for them;
//   - the reads hold the read limit at the vendor, burst + rate·W with the
//     limiter's allowance, as pushes hold theirs;
//   - a check draws tokens only from its channel's read bucket
//     (channel#credential#read), never from a push meter, and the vendor
//     counts no read as a push, sent or applied.
//
// The catalogue takes these parts after the pressure parts (their init),
// so that a seed draws every earlier part as it did before them.

// parityPath is the read's path at the vendor, apart from every
// endpoint's /v1/<kind>.
const parityPath = "/parr"

// Parity is a schedule of parity checks on one expedia-ar channel and the
// hand edits made at its OTA.
type Parity struct {
	Channel string
	// Rate, Burst and MaxDays are the config's channels.<c>.read.
	Rate    float64
	Burst   int
	MaxDays int
	// Props are the properties whose connection the schedule checks (one
	// stack rule each), from First every Every while the load runs, then
	// further apart (parityGap) until the run ends, over Days days from
	// day0.
	Props       []int32
	First       time.Duration
	Every, Days int
	// Edits are hand edits at the OTA, each at a drawn time of the load,
	// of a day the OTA holds of one of Props.
	Edits int
	// NoRepair checks without repairing (the pinned test's control).
	NoRepair bool
}

var parityParts = []part{
	{"parity", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		var cands []int
		for i, c := range b.sc.Channels {
			if w := c.Vendor.Wire; w == nil || w.Format == "expedia-ar" {
				cands = append(cands, i)
			}
		}
		if len(cands) == 0 {
			return nil, "every channel speaks a format that cannot read (opentravel)"
		}
		c := &b.sc.Channels[cands[r.IntN(len(cands))]]
		facets := []string{}
		if c.Vendor.Wire == nil {
			c.Vendor.Wire = &WireSpec{Format: "expedia-ar", drew: true}
			facets = append(facets, "format=expedia-ar")
		}
		p := &Parity{Channel: c.Name, Rate: oneOf(r, 0.2, 1.0, 5.0), Burst: oneOf(r, 1, 2, 5), MaxDays: oneOf(r, 10, 31),
			First: time.Duration(5+r.IntN(20)) * time.Second, Every: oneOf(r, 20, 60, 180),
			Days: min(b.sc.Load.WithinDays+b.sc.Load.MaxDays, horizon), Edits: oneOf(r, 1, 5, 20)}
		for range 1 + r.IntN(3) {
			if pr := int32(r.IntN(b.sc.Properties)); !slices.Contains(p.Props, pr) {
				p.Props = append(p.Props, pr)
			}
		}
		b.sc.Parity = p
		return append(facets, fmt.Sprintf("read.limit=%g/%d", p.Rate, p.Burst), fmt.Sprintf("read.max_days=%d", p.MaxDays),
			fmt.Sprintf("parity.every=%ds", p.Every), fmt.Sprintf("parity.edits=%d", p.Edits)), valid(b)
	}},
}

// readKey is the read endpoint's config, for connections.json.
func (p *Parity) readKey() string {
	return fmt.Sprintf(`"read": {"path": %q, "limit": {"rate": %g, "burst": %d}, "max_days": %d}`, parityPath, p.Rate, p.Burst, p.MaxDays)
}

// reads is what a vendor saw of parity reads: its own windows by
// credential, apart from every push meter.
type reads struct {
	limit, loose      window.Limit
	enforced, checked map[string]*window.Log
	Reads, Throttled  int
	Over              int
	FirstOver         string
}

// serveRead answers a PARR read from the vendor's copy; the caller calls
// done(answer.key).
func (v *Vendor) serveRead(r *http.Request, body []byte) answer {
	q, err := otaformat.DecodeExpediaPARR(body)
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.UnixMicro(time.Now().UnixMicro())
	key := q.User + "/read"
	v.inFlight[key]++
	h := http.Header{}
	a := answer{status: http.StatusOK, header: h, lat: v.latency.draw(v.rng), key: key}
	rd := v.reads
	rd.Reads++
	if q.User == "" || q.Password != "pw-"+q.User {
		v.NoCredential++
		if v.FirstNoCredential == "" {
			v.FirstNoCredential = fmt.Sprintf("%s read at %v: %s", v.Name, now.Format(time.StampMicro), r.Header.Get("X-Job-Id"))
		}
	}
	if rd.checked[key] == nil {
		rd.checked[key], rd.enforced[key] = &window.Log{}, &window.Log{}
	}
	if !rd.checked[key].Admit(now, rd.loose).Allowed {
		if rd.Over++; rd.FirstOver == "" {
			rd.FirstOver = fmt.Sprintf("%s %s at %v: a read over burst %d + rate %g·W", v.Name, key, now.Format(time.StampMicro), rd.loose.Burst, rd.loose.Rate)
		}
	}
	if d := rd.enforced[key].Admit(now, rd.limit); !d.Allowed {
		rd.Throttled++
		a.status = http.StatusTooManyRequests
		h.Set("Retry-After", fmt.Sprint(int(math.Ceil(d.Wait.Seconds()))))
		a.body = otaformat.AnswerExpediaPARR(&otaformat.Refusal{Status: 429, Code: "429", Text: "Too many requests"}, "", "", nil)
		return a
	}
	var ref *otaformat.Refusal
	if errors.As(err, &ref) {
		a.body = otaformat.AnswerExpediaPARR(ref, "", "", nil)
		return a
	}
	prop, ok := v.props[q.Hotel]
	if !ok {
		a.body = otaformat.AnswerExpediaPARR(otaformat.ExpediaARHotelDenied(q.Hotel), "", "", nil)
		return a
	}
	a.body = otaformat.AnswerExpediaPARR(nil, q.From, q.To, v.ledger.holding(v.ch, prop, q.From, q.To))
	return a
}

// holding is what OTA copy ch holds of prop over from..to (dates), in
// the vocabulary of test/otaformat: a room type's availability, a rate
// plan's amount and minimum stay.
func (l *Ledger) holding(ch int, prop int32, from, to string) map[string]map[otaformat.Product]map[string]any {
	a, err1 := time.Parse(time.DateOnly, from)
	b, err2 := time.Parse(time.DateOnly, to)
	out := map[string]map[otaformat.Product]map[string]any{}
	if err1 != nil || err2 != nil {
		return out
	}
	first, last := int(a.Sub(day0)/(24*time.Hour)), int(b.Sub(day0)/(24*time.Hour))
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, h := range l.held[ch] {
		if k.prop != prop {
			continue
		}
		for d := range blockDays {
			day := int(k.block)*blockDays + d
			if day < first || day > last || h.seq[d] == 0 && h.val[d] == 0 {
				continue
			}
			date := day0.AddDate(0, 0, day).Format(time.DateOnly)
			p := otaformat.Product{RoomType: roomNames[k.room], RatePlan: planNames[k.plan]}
			f := map[string]any{}
			switch kindNames[k.kind] {
			case "availability":
				p.RatePlan = ""
				f["available"] = int(h.val[d])
			case "rates":
				f["amount"], f["currency"] = fmt.Sprint(h.val[d]), "EUR"
			default:
				f["min_los"] = int(h.val[d])
			}
			if out[date] == nil {
				out[date] = map[otaformat.Product]map[string]any{}
			}
			if out[date][p] == nil {
				out[date][p] = map[string]any{}
			}
			for k, v := range f {
				out[date][p][k] = v
			}
		}
	}
	return out
}

// handEdit is a hotelier's edit of day d of row k at OTA copy ch: the
// copy holds v with no sequence the PMS published, so the lane is behind
// until a push brings the newest value back. It returns false if the copy
// holds nothing of the day or already holds v.
func (l *Ledger) handEdit(ch int, k rowKey, day int, v int32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	bk, d := at(k, day)
	h, t := l.held[ch][bk], l.truth[bk]
	if h == nil || t == nil || h.seq[d] == 0 || h.val[d] == v {
		return false
	}
	if h.seq[d] >= t.seq[d] {
		l.stale[laneKey{k.prop, k.kind, uint8(ch)}]++
	}
	h.seq[d], h.val[d] = 0, v
	if h.least != nil {
		h.least[d] = 0
	}
	return true
}

// heldDays are the (row, day)s OTA copy ch holds of props within days.
func (l *Ledger) heldDays(ch int, props []int32, days int) [][2]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][2]int
	for k, h := range l.held[ch] {
		if !slices.Contains(props, k.prop) {
			continue
		}
		for d := range blockDays {
			if day := int(k.block)*blockDays + d; day < days && h.seq[d] > 0 {
				out = append(out, [2]int{encodeRow(k), day})
			}
		}
	}
	slices.SortFunc(out, func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	})
	return out
}

func encodeRow(k rowKey) int {
	return int(k.prop)<<24 | int(k.kind)<<16 | int(k.room)<<8 | int(k.plan)
}

func decodeRow(n int) rowKey {
	return rowKey{prop: int32(n >> 24), kind: uint8(n >> 16), room: uint8(n >> 8), plan: uint8(n)}
}

// edit is one hand edit, for the end's exemption.
type edit struct {
	k   rowKey
	day int
	val int32
	at  time.Time
}

// paritySim is the schedule's state in a run.
type paritySim struct {
	spec   *Parity
	ch     int // the scenario's channel
	mu     sync.Mutex
	edits  []edit
	readAt map[int32]time.Time // by property: when its last check began reading
	// keys are the buckets the checks drew tokens from.
	keys                                  map[string]int
	Checks, Failed, Drifted, Repairs, Dys int
	FirstErr                              string
}

// startParity begins the schedule of s.sc.Parity (nil: none).
func (s *sim) startParity(ctx context.Context, wg *sync.WaitGroup) {
	p := s.sc.Parity
	if p == nil {
		return
	}
	ps := &paritySim{spec: p, ch: -1, readAt: map[int32]time.Time{}, keys: map[string]int{}}
	for i, c := range s.sc.Channels {
		if c.Name == p.Channel {
			ps.ch = i
		}
	}
	s.parity = ps
	v := s.vendors[ps.ch]
	limit := window.Limit{Rate: p.Rate, Burst: p.Burst}
	allowance := int(math.Ceil(p.Rate * (2*s.sc.DBLatency.P99.Seconds() + s.sc.Faults.ClockSkew.Seconds())))
	v.mu.Lock()
	v.reads = &reads{limit: limit, loose: window.Limit{Rate: p.Rate, Burst: p.Burst + allowance},
		enforced: map[string]*window.Log{}, checked: map[string]*window.Log{}}
	v.mu.Unlock()
	r := rand.New(rand.NewPCG(s.sc.Seed, 0x9a417))
	at := make([]time.Duration, p.Edits)
	for i := range at {
		at[i] = time.Duration(r.Int64N(int64(s.sc.Load.Duration)))
	}
	slices.Sort(at)
	wg.Go(func() { s.handEdits(ctx, at, r) })
	wg.Go(func() { s.parityChecks(ctx) })
}

// handEdits edits a held day of the checked properties at each of at.
func (s *sim) handEdits(ctx context.Context, at []time.Duration, r *rand.Rand) {
	ps := s.parity
	copyOf := slices.Index(s.copyOf, ps.ch)
	for _, t := range at {
		if sleep(ctx, time.Until(s.start.Add(t))) != nil {
			return
		}
		days := s.ledger.heldDays(copyOf, ps.spec.Props, ps.spec.Days)
		if len(days) == 0 {
			continue
		}
		d := days[r.IntN(len(days))]
		k, v := decodeRow(d[0]), int32(1+r.IntN(500))
		if s.ledger.handEdit(copyOf, k, d[1], v) {
			ps.mu.Lock()
			ps.edits = append(ps.edits, edit{k: k, day: d[1], val: v, at: time.Now()})
			ps.mu.Unlock()
		}
	}
}

// parityChecks runs a check of each scheduled connection every
// parityGap, until the run ends.
func (s *sim) parityChecks(ctx context.Context) {
	ps := s.parity
	if sleep(ctx, ps.spec.First) != nil {
		return
	}
	every, loadEnd := time.Duration(ps.spec.Every)*time.Second, s.start.Add(s.sc.Load.Duration)
	for {
		for _, p := range ps.spec.Props {
			s.parityCheckOne(ctx, p)
		}
		if sleep(ctx, parityGap(every, time.Since(loadEnd))) != nil {
			return
		}
	}
}

// maxParityGap is the stack's shortest parity schedule (infra/stack
// ParityCheck.Every).
const maxParityGap = time.Hour

// parityGap is the wait before the next pass of checks, afterLoad after
// the load's end (negative while it runs). The load compresses a day's
// hand edits and faults into a minute or two, so the checks come every
// Every while it runs; a drain that waits for a quota's next day is
// hours of a quiet fleet, which a deployed stack checks at most hourly.
// So after the load the gap grows with the time since it ended, from
// Every to maxParityGap: the first pass after the load still reads every
// hand edit (all made during it), and the drain still has checks
// repairing beside its pushes, a few rather than one every Every (seed
// 16: 82 h of drain, 25,458 checks every 20 s).
func parityGap(every, afterLoad time.Duration) time.Duration {
	return min(max(every, afterLoad), max(every, maxParityGap))
}

// parityCheckOne is one parity event to the function: an invocation that
// runs parity.Checker as functions/sync does, repairing through its
// syncer as a batch of the changes queue.
func (s *sim) parityCheckOne(ctx context.Context, prop int32) {
	ps := s.parity
	in, err := s.acquire()
	if err != nil {
		return
	}
	defer s.release(in)
	secret := func(_ context.Context, ref string) (string, error) { return s.sc.tokenOf(ref), nil }
	if in.p.Credentials != nil {
		secret = in.p.Credentials.Token
	}
	chk := &parity.Checker{Config: s.cfg, State: in.sy.State, Limiter: keysOf{in.p.Limiter, ps}, HTTP: s.http, Secret: secret}
	if !ps.spec.NoRepair {
		chk.Repair = parity.SyncerRepairer{Syncer: in.sy}
	}
	conn, err := parity.ConnectionOf(ctx, s.cfg, nil, propID(int(prop)), ps.spec.Channel)
	if err != nil {
		ps.fail(err)
		return
	}
	began := time.Now()
	rep, err := chk.Run(ctx, parity.Check{PropertyID: propID(int(prop)), Connection: conn,
		From: day0.Format(ari.DateLayout), To: day0.AddDate(0, 0, ps.spec.Days-1).Format(ari.DateLayout)})
	if ctx.Err() != nil {
		return
	}
	ps.mu.Lock()
	ps.Checks++
	ps.Drifted += len(rep.Drifted)
	ps.Repairs += rep.Repairs
	ps.Dys += rep.Days
	if err == nil {
		ps.readAt[prop] = began
	}
	ps.mu.Unlock()
	if err != nil {
		ps.fail(err)
	}
}

func (ps *paritySim) fail(err error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.Failed++; ps.FirstErr == "" {
		ps.FirstErr = err.Error()
	}
}

// keysOf records the buckets a check draws from.
type keysOf struct {
	next parity.Limiter
	ps   *paritySim
}

func (k keysOf) Wait(ctx context.Context, b limiter.Bucket, n int, maxWait time.Duration) (limiter.Reservation, error) {
	k.ps.mu.Lock()
	k.ps.keys[b.Key] += n
	k.ps.mu.Unlock()
	return k.next.Wait(ctx, b, n, maxWait)
}

func (k keysOf) Penalize(ctx context.Context, b limiter.Bucket, until time.Time) error {
	k.ps.mu.Lock()
	k.ps.keys[b.Key] += 0
	k.ps.mu.Unlock()
	return k.next.Penalize(ctx, b, until)
}

// parityCheck adds this file's invariants to r and exempts from the
// ledger's stale check the hand edits no check could have seen. It runs
// after wireCheck and before the stale check.
func (s *sim) parityCheck(r *Report) {
	ps := s.parity
	if ps == nil {
		return
	}
	v := s.vendors[ps.ch]
	v.mu.Lock()
	rd := *v.reads
	v.mu.Unlock()
	if rd.Over > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("read window: %d parity reads over the read limit's burst + rate·(W + λ); first: %s", rd.Over, rd.FirstOver))
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var bad []string
	for k := range ps.keys {
		if !strings.HasPrefix(k, ps.spec.Channel+"#") || !strings.HasSuffix(k, "#read") || strings.Count(k, "#") != 2 {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		r.Violations = append(r.Violations, fmt.Sprintf("parity tokens: a check drew from %v, not its channel's read bucket (%s#<credential>#read)", bad, ps.spec.Channel))
	}
	copyOf := slices.Index(s.copyOf, ps.ch)
	late := lateEdits(ps.edits, ps.readAt)
	s.ledger.mu.Lock()
	remain := 0
	for wd, v := range late {
		if h := s.ledger.held[copyOf][wd.k]; h != nil && h.val[wd.d] == v {
			remain++
		}
	}
	prev := s.ledger.exemptDay
	s.ledger.exemptDay = func(ch int, k rowKey, d int, held int32) bool {
		if ch == copyOf {
			if v, ok := late[wireDay{k, d}]; ok && v == held {
				return true
			}
		}
		return prev != nil && prev(ch, k, d, held)
	}
	s.ledger.mu.Unlock()
	r.Parity = &ParityReport{Channel: ps.spec.Channel, Connections: len(ps.spec.Props), Checks: ps.Checks, Failed: ps.Failed, FirstErr: ps.FirstErr,
		Days: ps.Dys, Drifted: ps.Drifted, Repairs: ps.Repairs, Edits: len(ps.edits), Late: len(late), LateHeld: remain,
		Reads: rd.Reads, Throttled: rd.Throttled, Buckets: maps.Clone(ps.keys)}
}

// lateEdits are the days no check could have seen edited, with the value
// their last edit left: those edited after their property's last check
// that read the OTA whole began (readAt), or never checked. edits are in
// time order.
func lateEdits(edits []edit, readAt map[int32]time.Time) map[wireDay]int32 {
	late := map[wireDay]int32{}
	for _, e := range edits {
		bk, d := at(e.k, e.day)
		if read, ok := readAt[e.k.prop]; !ok || e.at.After(read) {
			late[wireDay{bk, d}] = e.val
		} else {
			// Seen by the check that began after it: the edit must be
			// repaired, whatever an earlier one of the day left.
			delete(late, wireDay{bk, d})
		}
	}
	return late
}

// ParityReport is what a run's parity checks and hand edits did.
type ParityReport struct {
	Channel             string
	Connections, Checks int
	Failed              int
	FirstErr            string
	// Days, Drifted and Repairs sum the checks' reports.
	Days, Drifted, Repairs int
	// Edits counts the hand edits; Late the days edited after their
	// connection's last check began reading, LateHeld those of them the
	// OTA still holds as edited at the end (left out of the stale check).
	Edits, Late, LateHeld int
	// Reads and Throttled are counted at the vendor; Buckets are the
	// tokens the checks drew, by bucket.
	Reads, Throttled int
	Buckets          map[string]int
}

func (p *ParityReport) String() string {
	s := fmt.Sprintf("%s: %d checks of %d connections (%d failed), %d days compared, %d drifted, %d repair changes; %d hand edits (%d days edited after their connection's last check began reading, %d of them still held as edited); %d reads, %d throttled at the vendor, tokens by bucket %v",
		p.Channel, p.Checks, p.Connections, p.Failed, p.Days, p.Drifted, p.Repairs, p.Edits, p.Late, p.LateHeld, p.Reads, p.Throttled, p.Buckets)
	if p.FirstErr != "" {
		s += fmt.Sprintf("; first failure: %.200s", p.FirstErr)
	}
	return s
}
