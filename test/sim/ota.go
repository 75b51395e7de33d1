package sim

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// Vendor is one OTA: it meters each (credential, endpoint) with its own
// sliding-window log (sdk/limiter/limitertest/window, which shares no code with
// sdk/gcra), answers after a drawn latency, fails with 5xx while told to,
// refuses a share of pushes, and writes every day it accepts to the ledger.
// Beside its enforcement it checks what the fleet sent against the
// published limit with a second log: a send that log refuses is a
// violation of burst + rate·W.
type Vendor struct {
	Name    string
	ch      int
	ledger  *Ledger
	latency Latency

	mu        sync.Mutex
	rng       *rand.Rand
	published window.Limit
	// real is the limit the vendor enforces (the published one unless a
	// fault halves it).
	real     window.Limit
	enforced map[string]*window.Log
	// strict checks sends against burst + rate·W, check against
	// burst + allowance + rate·W: sdk/limiter documents (package doc,
	// "Clock skew") that a write claims the now its call read, so a fleet
	// may over-grant rate·λ tokens, λ the latency of a call's writes (two
	// round trips); allowance is ⌈rate · 2 · DynamoDB p99⌉.
	strict, check map[string]*window.Log
	allowance     int
	// localSpans are the stretches of the run (from its start) in which a
	// LocalShare channel's processes may push on their local shares, and
	// instances the N those shares divide the limits by (localLimit).
	localSpans [][2]time.Duration
	instances  int
	// fail5xx reports whether the vendor answers 503 at a time.
	fail5xx func(time.Time) bool
	refuse  float64

	Sent, Accepted, Throttled, Failed, Refused int
	// ThrottledAt is when each 429 was answered, from the run's start.
	ThrottledAt                 []time.Duration
	Violations, Strict          int
	FirstViolation, FirstStrict string
	ByKey                       map[string]int // sends per credential/endpoint
	recent                      map[string][]sent
	// perSec counts sends per key per second of the run.
	perSec map[string][]int32
	start  time.Time
	props  map[string]int32

	// spec is what the vendor does beyond its rate limit (VendorSpec).
	spec VendorSpec
	// inFlight counts each bucket's requests from arrival to answer.
	inFlight map[string]int
	// used counts each bucket's requests in each quota period.
	used map[string]int
	// items and itemsCheck meter items: the enforced real limit and the
	// check against the published one.
	items, itemsCheck map[string]*weightedLog
	// windows and windowsCheck are the spec's extra windows by bucket.
	windows, windowsCheck map[string][]*window.Log
	// InFlightOver and QuotaOver count sends past the config's
	// max_in_flight and the quota (violations); Hung and Big the requests
	// answered never and with a body over 64 KB.
	InFlightOver, QuotaOver, Hung, Big int
	FirstInFlight, FirstQuota          string
	// maxInFlight is the config's max_in_flight, to check.
	maxInFlight int
	// silences are, by bucket, the silences the vendor's 429s asked for:
	// each from its answer plus a second (the fleet hears it and writes it
	// to its bucket) until its Retry-After, at most the push client's
	// documented cap (docs/design.md: 15 minutes), and marked unheard
	// where its client gave up before the answer came. Early counts
	// requests that arrived inside one not unheard (a violation).
	silences map[string][]*silence
	// refusedBodies is, by bucket, the distinct requests refused for an
	// unmapped room (Isolating).
	refusedBodies map[string]map[uint64]bool
	boxed         map[string]bool // the buckets VendorSpec.Box has put in its box
	// off are stretches in which a hotel's connection is disabled for
	// every worker; OffPushes counts requests for it meanwhile.
	off        []offSpan
	OffPushes  int
	FirstOff   string
	Early      int
	FirstEarly string
	// wireStats: what a vendor of an XML format refused (ota_formats.go).
	wireStats
	// reads meters parity reads, if the vendor answers them
	// (adversary_parts_parity.go).
	reads *reads
	// Arrivals, if not nil, logs every request by bucket (the onboarding's
	// drain breakdown, onboard.go).
	Arrivals map[string][]arrival
}

// retryAfterCap is the most the fleet is documented to wait for one
// Retry-After (otapush.DefaultPolicy.MaxRetryAfter), repeated here: the
// oracle shares no code with the SDK.
const retryAfterCap = 15 * time.Minute

// NewVendor is channel ch's OTA with the published limit.
func NewVendor(name string, ch int, ledger *Ledger, r *rand.Rand, lat Latency, published window.Limit, props map[string]int32) *Vendor {
	return &Vendor{Name: name, ch: ch, ledger: ledger, rng: r, latency: lat, published: published, real: published,
		enforced: map[string]*window.Log{}, check: map[string]*window.Log{}, strict: map[string]*window.Log{}, ByKey: map[string]int{}, props: props,
		recent: map[string][]sent{}, perSec: map[string][]int32{}, start: time.Now(),
		inFlight: map[string]int{}, used: map[string]int{}, items: map[string]*weightedLog{}, itemsCheck: map[string]*weightedLog{},
		windows: map[string][]*window.Log{}, windowsCheck: map[string][]*window.Log{}, silences: map[string][]*silence{}}
}

// answer is the vendor's decision on one request.
type answer struct {
	status int
	header http.Header
	lat    time.Duration
	key    string // the bucket, for done
	big    bool   // a body over 64 KB
	body   []byte // the body in the vendor's format (XML), if not json's
	// silence is the silence this answer asked for, if any: unheard
	// (Vendor.unheard) marks it so.
	silence *silence
}

// silence is one 429's: the span it asks of its bucket, whether its
// client gave up before the answer came, and the death of the invocation
// that heard it, if it may die.
type silence struct {
	from, until time.Time
	unheard     bool
	heardBy     *death
}

// kept reports whether the fleet could keep s: its answer came, and the
// invocation that heard it lived on to its start, the second the vendor
// gives the fleet to write it down. An invocation killed in that second
// (a Lambda death, or deferred-deaths' kill of every deferred invocation
// soon after it begins) took the silence with it: no worker can record
// what a dead one heard (seed 725: a 429 asking a day heard 1 ms before
// its invocation's kill, the throttle's write cancelled with it, and
// requests 5 minutes into the silence).
func (s *silence) kept() bool {
	return !s.unheard && !s.heardBy.before(s.from)
}

// unheard takes back the silence a's Retry-After asked for when its client
// gave up before the answer came: the fleet can keep only a silence it
// heard, and a request that timed out heard nothing (the vendor's next
// answer asks again). Every other silence stands, those asked before a's
// and since: several answers in flight at once may each go unheard, in
// any order (seed 725: three 429s in 0.4 s, each asking a quarter hour,
// all three given up on; putting back the silence each replaced brought
// back the first, which no client heard).
func (v *Vendor) unheard(a answer) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if a.silence != nil {
		a.silence.unheard = true
	}
}

// inside returns the heard silence of key that now lies in, if any. A
// silence's fate is known by its start: its client gave up, if it did,
// before the answer came, a second before the silence begins.
func (v *Vendor) inside(key string, now time.Time) *silence {
	for _, s := range v.silences[key] {
		if s.kept() && !now.Before(s.from) && now.Before(s.until) {
			return s
		}
	}
	return nil
}

// heard is how long the heard silences of ss cover in all, overlaps once.
func heard(ss []*silence) time.Duration {
	spans := make([]*silence, 0, len(ss))
	for _, s := range ss {
		if s.kept() {
			spans = append(spans, s)
		}
	}
	slices.SortFunc(spans, func(a, b *silence) int { return a.from.Compare(b.from) })
	var total time.Duration
	var end time.Time
	for _, s := range spans {
		from := later(s.from, end)
		if s.until.After(from) {
			total += s.until.Sub(from)
			end = s.until
		}
	}
	return total
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Silenced is the most silence the vendor asked of one bucket in all (the
// union of its heard silences). A bucket sends only between its
// silences, so a lane of it drains no sooner than they all end.
func (v *Vendor) Silenced() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	var most time.Duration
	for _, ss := range v.silences {
		most = max(most, heard(ss))
	}
	return most
}

// Occupied is the most time one silenced bucket needed in all: its
// silences, and its sends at the published rate between them. A bucket
// of burst 1 silenced a quarter hour every few dozen sends drains in
// stretches of a minute or two between its silences, and those add up
// (seed 636: 57 silences of one bucket, 495 sends, 16 min of them).
func (v *Vendor) Occupied() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	var most time.Duration
	for key, ss := range v.silences {
		if d := heard(ss); d > 0 {
			most = max(most, d+time.Duration(float64(v.ByKey[key])/v.published.Rate*float64(time.Second)))
		}
	}
	return most
}

// isolated records a request of bucket key refused for the unmapped room.
// Under v.mu.
func (v *Vendor) isolated(key string, body []byte) {
	if v.refusedBodies == nil {
		v.refusedBodies = map[string]map[uint64]bool{}
	}
	if v.refusedBodies[key] == nil {
		v.refusedBodies[key] = map[uint64]bool{}
	}
	h := fnv.New64a()
	h.Write(body)
	v.refusedBodies[key][h.Sum64()] = true
}

// Isolating is the most distinct requests the vendor refused of one
// bucket for an unmapped room: each a step of an isolation (format.Isolate
// takes a refused message apart until its refused changes are alone),
// none of them one sent again.
func (v *Vendor) Isolating() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	most := 0
	for _, b := range v.refusedBodies {
		most = max(most, len(b))
	}
	return most
}

// done ends a request of bucket key: answered, or given up by the client.
func (v *Vendor) done(key string) {
	v.mu.Lock()
	v.inFlight[key]--
	v.mu.Unlock()
}

// bucketOf is the bucket the vendor meters a request to an endpoint on.
func (v *Vendor) bucketOf(cred, endpoint string) string {
	if m := v.spec.Meters[endpoint]; m != "" {
		return cred + "/" + m
	}
	return cred + "/" + endpoint
}

// weight is what one push costs at the vendor: 1, or its items × weight.
func (v *Vendor) weight(p pushBody) float64 {
	if !v.spec.Items {
		return 1
	}
	n := 0
	for _, it := range p.Items {
		n += len(it.Days)
	}
	return float64(n) * max(v.spec.ItemWeight, 1e-9)
}

// SetReal changes the limit the vendor enforces from now on.
func (v *Vendor) SetReal(l window.Limit) { v.mu.Lock(); v.real = l; v.mu.Unlock() }

// Set5xx makes the vendor answer 503 while down(now) holds.
func (v *Vendor) Set5xx(down func(time.Time) bool) { v.mu.Lock(); v.fail5xx = down; v.mu.Unlock() }

// sent is one request as the vendor's check saw it: the last ones are kept
// to show the window a violation broke.
type sent struct {
	at  time.Time
	job string
}

// serve decides one request at its arrival (now) and returns the answer;
// the caller calls done(answer.key) when the answer is out.
func (v *Vendor) serve(r *http.Request, body []byte) (out answer) {
	h := http.Header{}
	if v.reads != nil && r.URL.Path == parityPath {
		return v.serveRead(r, body)
	}
	endpoint := strings.TrimPrefix(r.URL.Path, "/v1/")
	rd := v.read(r, body)
	cred, p, perr := rd.cred, rd.push, rd.perr
	key := v.bucketOf(cred, endpoint)
	v.mu.Lock()
	defer v.mu.Unlock()
	asked := len(v.silences[key])
	defer func() {
		if ss := v.silences[key]; len(ss) > asked {
			out.silence = ss[len(ss)-1]
		}
	}()
	// In whole microseconds, as test/mockota records arrivals: the
	// limiter's clock has that resolution, so a slot is up to 1 µs early
	// against a nanosecond clock.
	now := time.UnixMicro(time.Now().UnixMicro())
	lat := v.latency.draw(v.rng)
	if v.spec.Hang > 0 && v.rng.Float64() < v.spec.Hang || within(v.spec.HangSpan, v.start, now) || within(v.spec.LateSpan, v.start, now) {
		v.Hung++
		lat = 24 * time.Hour // past every timeout: the client gives up
	}
	if !rd.credOK && !v.spec.Unchecked {
		v.NoCredential++
		if v.FirstNoCredential == "" {
			v.FirstNoCredential = fmt.Sprintf("%s %s at %v: %s", v.Name, endpoint, now.Format(time.StampMicro), r.Header.Get("X-Job-Id"))
		}
	}
	ans := func(status int) answer { return answer{status: status, header: h, lat: lat, key: key} }
	v.Sent++
	v.ByKey[key]++
	v.inFlight[key]++
	sec := int(now.Sub(v.start) / time.Second)
	for len(v.perSec[key]) <= sec {
		v.perSec[key] = append(v.perSec[key], 0)
	}
	v.perSec[key][sec]++
	v.recent[key] = append(v.recent[key], sent{at: now, job: r.Header.Get("X-Job-Id")})
	if v.Arrivals != nil {
		v.Arrivals[key] = append(v.Arrivals[key], arrival{at: now, job: r.Header.Get("X-Job-Id")})
	}
	// Enough sends to hold a burst and what follows it.
	if n, keep := len(v.recent[key]), 2*v.published.Burst+64; n > keep {
		v.recent[key] = v.recent[key][n-keep:]
	}
	v.watch(key, now, v.weight(p))
	if perr == nil && len(v.off) > 0 {
		v.offCheck(p.HotelRef, now)
	}
	if q := v.inside(key, now); !v.spec.Unchecked && q != nil {
		v.Early++
		if v.FirstEarly == "" {
			v.FirstEarly = fmt.Sprintf("%s %s at %v: a request inside the silence a 429 asked for, %v–%v", v.Name, key, now.Format(time.StampMicro),
				q.from.Format(time.StampMicro), q.until.Format(time.StampMicro))
		}
	}
	if m := v.maxInFlight; m > 0 && v.inFlight[key] > m && !v.spec.Unchecked {
		v.InFlightOver++
		if v.FirstInFlight == "" {
			v.FirstInFlight = fmt.Sprintf("%s %s at %v: %d requests at the vendor at once, max_in_flight %d", v.Name, key, now.Format(time.StampMicro), v.inFlight[key], m)
		}
	}
	if c := v.spec.InFlight; c > 0 && v.inFlight[key] > c {
		v.Throttled++
		v.ThrottledAt = append(v.ThrottledAt, now.Sub(v.start))
		v.retryAfter(h, key, now, lat, time.Second)
		return ans(http.StatusTooManyRequests)
	}
	if box := v.spec.Box; box > 0 && !now.Before(v.start.Add(box)) && !v.boxed[key] {
		if v.boxed == nil {
			v.boxed = map[string]bool{}
		}
		v.boxed[key] = true
		v.Throttled++
		v.ThrottledAt = append(v.ThrottledAt, now.Sub(v.start))
		v.retryAfter(h, key, now, lat, v.spec.BoxFor)
		return ans(http.StatusTooManyRequests)
	}
	if v.spec.Overload > 0 && v.rng.Float64() < v.spec.Overload {
		v.Throttled++
		v.ThrottledAt = append(v.ThrottledAt, now.Sub(v.start))
		v.retryAfter(h, key, now, lat, max(v.spec.Penalty, time.Second))
		return ans(http.StatusTooManyRequests)
	}
	if ok, wait := v.enforce(key, now, v.weight(p)); !ok {
		v.Throttled++
		v.ThrottledAt = append(v.ThrottledAt, now.Sub(v.start))
		v.retryAfter(h, key, now, lat, wait)
		v.rateLimitFields(h, 0, wait)
		return ans(http.StatusTooManyRequests)
	}
	if q := v.spec.Quota; q != nil {
		from, to := quotaPeriod(q, now)
		pk := key + "@" + from.UTC().Format(time.RFC3339)
		v.used[pk]++
		if v.used[pk] > q.Count {
			if !v.spec.Unchecked {
				v.QuotaOver++
				if v.FirstQuota == "" {
					v.FirstQuota = fmt.Sprintf("%s %s at %v: request %d of the %s from %v (%s), quota %d", v.Name, key, now.Format(time.StampMicro),
						v.used[pk], q.Period, from.Format(time.DateTime), q.Zone, q.Count)
				}
			}
			v.Throttled++
			v.ThrottledAt = append(v.ThrottledAt, now.Sub(v.start))
			v.retryAfter(h, key, now, lat, to.Sub(now))
			return ans(http.StatusTooManyRequests)
		}
	}
	if down := v.spec.Down; (v.fail5xx != nil && v.fail5xx(now)) || down[1] > down[0] && !now.Before(v.start.Add(down[0])) && now.Before(v.start.Add(down[1])) {
		v.Failed++
		return ans(http.StatusServiceUnavailable)
	}
	if u := v.spec.Unauthorized; strings.HasSuffix(cred, "_0") && u[1] > u[0] && !now.Before(v.start.Add(u[0])) && now.Before(v.start.Add(u[1])) {
		v.Refused++
		return ans(http.StatusUnauthorized)
	}
	if within(v.spec.HangSpan, v.start, now) {
		return ans(http.StatusOK) // never answered, nothing applied
	}
	items := v.ItemRefusals
	if status, body, refused := v.refuseWire(rd, now); refused {
		if v.ItemRefusals > items {
			v.isolated(key, rd.body)
		}
		a := ans(status)
		a.body = body
		return a
	}
	if v.spec.RateLimitHeaders == "reduced" && v.rng.Float64() < 0.02 {
		v.Failed++
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, max(v.published.Burst/2, 1), windowSeconds(v.published)))
		return ans(http.StatusServiceUnavailable)
	}
	if v.refuse > 0 && v.rng.Float64() < v.refuse {
		v.Refused++
		return ans(http.StatusUnprocessableEntity)
	}
	if perr != nil {
		v.Refused++
		return ans(http.StatusBadRequest)
	}
	prop, ok := v.props[strings.SplitN(p.HotelRef, "~", 2)[0]]
	kind := indexOf(kindNames, p.Kind)
	if !ok || kind < 0 {
		v.Refused++
		return ans(http.StatusUnprocessableEntity)
	}
	copyOf := v.ch
	if _, n, ok := strings.Cut(p.HotelRef, "~"); ok {
		k, _ := strconv.Atoi(n)
		copyOf += k
	}
	v.Accepted++
	for _, it := range p.Items {
		k := rowKey{prop: prop, kind: uint8(kind), room: uint8(indexOf(roomNames, it.RoomType)), plan: uint8(max(indexOf(planNames, it.RatePlan), 0))}
		for _, day := range it.Days {
			t, err := time.Parse("2006-01-02", day.Date)
			idx := int(t.Sub(day0) / (24 * time.Hour))
			if err != nil || idx < 0 || idx >= horizon || day.Values.Value == nil {
				continue
			}
			if v.spec.Wire.speaks() {
				v.ledger.AcceptWire(copyOf, k, idx, *day.Values.Value)
				continue
			}
			v.ledger.Accept(copyOf, k, idx, int32(day.Sequence), *day.Values.Value)
		}
	}
	v.rateLimitFields(h, 1, 0)
	a := ans(http.StatusOK)
	if v.spec.BigAnswers > 0 && v.rng.Float64() < v.spec.BigAnswers {
		v.Big++
		a.big = true
	}
	if v.spec.Wire.speaks() {
		a.body = v.success(p.Kind, a.big)
	}
	return a
}

// watch feeds a send of weight n to the invariants' logs: the published
// limit and every extra window, at burst + rate·W (strict) and with the
// limiter's allowance (a violation).
func (v *Vendor) watch(key string, now time.Time, n float64) {
	if v.spec.Unchecked {
		return
	}
	loose := window.Limit{Rate: v.published.Rate, Burst: v.published.Burst + v.allowance}
	// Within reach of an outage a local-share channel is checked against
	// that mode's bound, on logs of its own (the span's local sends would
	// otherwise count in every later window of the main logs).
	checked, local := key, v.localSpan(now)
	if local {
		checked, loose = key+"#local", v.localLimit(loose, v.published.Burst)
	}
	if v.spec.Items {
		if ok, _ := weighted(v.itemsCheck, key+"#strict").admit(now, n, v.published, true); !ok {
			v.Strict++
		}
		if ok, _ := weighted(v.itemsCheck, checked).admit(now, n, loose, true); !ok {
			v.Violations++
			if v.FirstViolation == "" {
				v.FirstViolation = fmt.Sprintf("%s %s at %v: a push of %g items over burst %d + rate %g·W", v.Name, key, now.Format(time.StampMicro), n, loose.Burst, loose.Rate)
			}
		}
	} else {
		if !admit(v.strict, key, now, v.published) {
			v.Strict++
			if v.FirstStrict == "" {
				v.FirstStrict = v.describe(key, now, v.published)
			}
		}
		if !admit(v.check, checked, now, loose) {
			v.Violations++
			if v.FirstViolation == "" {
				v.FirstViolation = v.describe(key, now, loose)
			}
		}
	}
	logs := v.windowsCheck[checked]
	for i, w := range v.spec.Windows {
		if len(logs) <= i {
			logs = append(logs, &window.Log{})
		}
		wl := window.Limit{Rate: w.Rate, Burst: w.Burst + int(math.Ceil(w.Rate*float64(v.allowance)/v.published.Rate))}
		if local {
			wl = v.localLimit(wl, w.Burst)
		}
		if !logs[i].Admit(now, wl).Allowed {
			v.Violations++
			if v.FirstViolation == "" {
				v.FirstViolation = fmt.Sprintf("%s %s at %v: a send over the extra window burst %d + rate %g·W", v.Name, key, now.Format(time.StampMicro), wl.Burst, wl.Rate)
			}
		}
	}
	v.windowsCheck[checked] = logs
}

// enforce decides a send of weight n against the real limit and the extra
// windows: whether the vendor takes it, else how long until it would.
func (v *Vendor) enforce(key string, now time.Time, n float64) (bool, time.Duration) {
	logs := v.windows[key]
	for len(logs) < len(v.spec.Windows) {
		logs = append(logs, &window.Log{})
	}
	v.windows[key] = logs
	for i, w := range v.spec.Windows {
		if d := logs[i].Admit(now, w); !d.Allowed {
			return false, d.Wait
		}
	}
	if v.spec.Items {
		return weighted(v.items, key).admit(now, n, v.real, false)
	}
	e := v.enforce1(key)
	d := e.Admit(now, v.real)
	return d.Allowed, d.Wait
}

func (v *Vendor) enforce1(key string) *window.Log {
	e := v.enforced[key]
	if e == nil {
		e = &window.Log{}
		v.enforced[key] = e
	}
	return e
}

func weighted(logs map[string]*weightedLog, key string) *weightedLog {
	g := logs[key]
	if g == nil {
		g = &weightedLog{}
		logs[key] = g
	}
	return g
}

// retryAfter says when to come back in the spec's form, and has the
// vendor watch that the fleet keeps the silence it asked for: from the
// answer's arrival (lat) plus a second until the Retry-After, at most
// retryAfterCap.
func (v *Vendor) retryAfter(h http.Header, key string, now time.Time, lat, wait time.Duration) {
	asked := time.Duration(math.Ceil(wait.Seconds())) * time.Second
	switch v.spec.RetryAfter {
	case "none":
		asked = 0
	case "date":
		// An HTTP-date has whole seconds: rounded up, never early.
		h.Set("Retry-After", now.Add(wait+time.Second-1).UTC().Format(http.TimeFormat))
		asked = now.Add(wait + time.Second - 1).Truncate(time.Second).Sub(now)
	case "huge":
		h.Set("Retry-After", "86400")
		asked = 24 * time.Hour
	case "ratelimit":
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, v.published.Burst, windowSeconds(v.published)))
		h.Set("RateLimit", fmt.Sprintf(`"default";r=0;t=%d`, int(math.Ceil(wait.Seconds()))))
	default:
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	}
	if from, until := now.Add(lat+time.Second), now.Add(min(asked, retryAfterCap)); until.After(from) {
		v.silences[key] = append(v.silences[key], &silence{from: from, until: until})
	}
}

// rateLimitFields adds the IETF draft-11 fields the spec asks for:
// remaining is how many more the vendor takes now (approximately: the
// vendor does not promise more).
func (v *Vendor) rateLimitFields(h http.Header, remaining int, reset time.Duration) {
	switch v.spec.RateLimitHeaders {
	case "draft11", "reduced":
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, v.published.Burst, windowSeconds(v.published)))
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, remaining, int(math.Ceil(reset.Seconds()))))
	case "malformed":
		h.Set("RateLimit-Policy", `"default";q=;w=-1`)
		h.Set("RateLimit", `default;r=lots;t=`)
	}
}

// windowSeconds is the window a policy names for a limit: the time to
// refill its burst, in whole seconds.
func windowSeconds(l window.Limit) int { return max(int(math.Ceil(float64(l.Burst)/l.Rate)), 1) }

// admit feeds a send to key's log in logs against l.
func admit(logs map[string]*window.Log, key string, now time.Time, l window.Limit) bool {
	g := logs[key]
	if g == nil {
		g = &window.Log{}
		logs[key] = g
	}
	return g.Admit(now, l).Allowed
}

// describe names a send over l and the fullest window of the last sends.
func (v *Vendor) describe(key string, now time.Time, l window.Limit) string {
	times := make([]time.Time, 0, len(v.recent[key]))
	for _, s := range v.recent[key] {
		times = append(times, s.at)
	}
	w, _ := window.Fullest(times, l)
	if os.Getenv("FLEETBUCKET_SIM_WINDOW_TRACE") != "" {
		for _, s := range v.recent[key] {
			fmt.Printf("  %s %s\n", s.at.Format(time.StampMicro), s.job)
		}
	}
	return fmt.Sprintf("%s %s at %v: a send over burst %d + rate %g·W; fullest window of the last %d sends: %v",
		v.Name, key, now.Format(time.StampMicro), l.Burst, l.Rate, len(times), w)
}

func indexOf(names []string, s string) int {
	for i, n := range names {
		if n == s {
			return i
		}
	}
	return -1
}

// Transport reaches the vendors by host name (the channel's name + ".sim")
// in memory: no sockets, so the bubble's clock stays in charge.
type Transport struct {
	Vendors map[string]*Vendor // by host
}

// RoundTrip decides at arrival, then answers after the vendor's latency (or
// the request's cancellation).
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	v, ok := t.Vendors[r.URL.Host]
	if !ok {
		return nil, fmt.Errorf("sim: no vendor at %s", r.URL.Host)
	}
	body := readBody(r)
	a := v.serve(r, body)
	defer v.done(a.key)
	status, h := a.status, a.header
	if err := sleep(r.Context(), a.lat); err != nil {
		v.unheard(a)
		return nil, err
	}
	if a.silence != nil {
		v.mu.Lock()
		a.silence.heardBy = deathOf(r.Context())
		v.mu.Unlock()
	}
	h.Set("Content-Type", "application/json")
	msg := fmt.Sprintf(`{"ok":%v}`, status < 300)
	if a.big {
		msg = fmt.Sprintf(`{"ok":true,"echo":%q}`, strings.Repeat("x", 80<<10))
	}
	if a.body != nil {
		msg = string(a.body)
		h.Set("Content-Type", "application/xml")
	}
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), Header: h,
		Body: io.NopCloser(bytes.NewReader([]byte(msg))), ContentLength: int64(len(msg)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// readBody reads a request's body in one allocation where its length is
// known (the push client sets it), instead of io.ReadAll's doublings.
func readBody(r *http.Request) []byte {
	if r.Body == nil {
		return nil
	}
	defer r.Body.Close()
	body := make([]byte, max(r.ContentLength, 0))
	n, _ := io.ReadFull(r.Body, body)
	var probe [1]byte
	k, err := r.Body.Read(probe[:])
	if k == 0 && err == io.EOF {
		return body[:n]
	}
	rest, _ := io.ReadAll(r.Body) // a length that was wrong, or unknown
	return append(append(body[:n], probe[:k]...), rest...)
}

// SentBetween counts key's sends in whole seconds [from, to) of the run.
func (v *Vendor) SentBetween(key string, from, to time.Duration) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	secs := v.perSec[key]
	for i := int(from / time.Second); i < int(to/time.Second) && i < len(secs); i++ {
		n += int(secs[i])
	}
	return n
}
