package sim

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/test/mockota/window"
)

// Vendor is one OTA: it meters each (credential, endpoint) with its own
// sliding-window log (test/mockota/window, which shares no code with
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
	real    window.Limit
	enforce map[string]*window.Log
	// strict checks sends against burst + rate·W, check against
	// burst + allowance + rate·W: sdk/limiter documents (package doc,
	// "Clock skew") that a write claims the now its call read, so a fleet
	// may over-grant rate·λ tokens, λ the latency of a call's writes (two
	// round trips); allowance is ⌈rate · 2 · DynamoDB p99⌉.
	strict, check map[string]*window.Log
	allowance     int
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
}

// NewVendor is channel ch's OTA with the published limit.
func NewVendor(name string, ch int, ledger *Ledger, r *rand.Rand, lat Latency, published window.Limit, props map[string]int32) *Vendor {
	return &Vendor{Name: name, ch: ch, ledger: ledger, rng: r, latency: lat, published: published, real: published,
		enforce: map[string]*window.Log{}, check: map[string]*window.Log{}, strict: map[string]*window.Log{}, ByKey: map[string]int{}, props: props,
		recent: map[string][]sent{}, perSec: map[string][]int32{}, start: time.Now()}
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

// serve decides one request at its arrival (now) and returns the status,
// the headers and how long the answer takes.
func (v *Vendor) serve(r *http.Request, body []byte) (int, http.Header, time.Duration) {
	h := http.Header{}
	endpoint := strings.TrimPrefix(r.URL.Path, "/v1/")
	cred := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	key := cred + "/" + endpoint
	v.mu.Lock()
	defer v.mu.Unlock()
	// In whole microseconds, as test/mockota records arrivals: the
	// limiter's clock has that resolution, so a slot is up to 1 µs early
	// against a nanosecond clock.
	now := time.UnixMicro(time.Now().UnixMicro())
	lat := v.latency.draw(v.rng)
	v.Sent++
	v.ByKey[key]++
	sec := int(now.Sub(v.start) / time.Second)
	for len(v.perSec[key]) <= sec {
		v.perSec[key] = append(v.perSec[key], 0)
	}
	v.perSec[key][sec]++
	v.recent[key] = append(v.recent[key], sent{at: now, job: r.Header.Get("X-Job-Id")})
	// Enough sends to hold a burst and what follows it.
	if n, keep := len(v.recent[key]), 2*v.published.Burst+64; n > keep {
		v.recent[key] = v.recent[key][n-keep:]
	}
	if !admit(v.strict, key, now, v.published) {
		v.Strict++
		if v.FirstStrict == "" {
			v.FirstStrict = v.describe(key, now, v.published)
		}
	}
	loose := window.Limit{Rate: v.published.Rate, Burst: v.published.Burst + v.allowance}
	if !admit(v.check, key, now, loose) {
		v.Violations++
		if v.FirstViolation == "" {
			v.FirstViolation = v.describe(key, now, loose)
		}
	}
	e := v.enforce[key]
	if e == nil {
		e = &window.Log{}
		v.enforce[key] = e
	}
	d := e.Admit(now, v.real)
	if !d.Allowed {
		v.Throttled++
		v.ThrottledAt = append(v.ThrottledAt, now.Sub(v.start))
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Wait.Seconds()))))
		return http.StatusTooManyRequests, h, lat
	}
	if v.fail5xx != nil && v.fail5xx(now) {
		v.Failed++
		return http.StatusServiceUnavailable, h, lat
	}
	if v.refuse > 0 && v.rng.Float64() < v.refuse {
		v.Refused++
		return http.StatusUnprocessableEntity, h, lat
	}
	p, err := decodePush(body)
	if err != nil {
		v.Refused++
		return http.StatusBadRequest, h, lat
	}
	prop, ok := v.props[p.HotelRef]
	kind := indexOf(kindNames, p.Kind)
	if !ok || kind < 0 {
		v.Refused++
		return http.StatusUnprocessableEntity, h, lat
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
			v.ledger.Accept(v.ch, k, idx, int32(day.Sequence), *day.Values.Value)
		}
	}
	return http.StatusOK, h, lat
}

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
	status, h, lat := v.serve(r, body)
	if err := sleep(r.Context(), lat); err != nil {
		return nil, err
	}
	h.Set("Content-Type", "application/json")
	msg := fmt.Sprintf(`{"ok":%v}`, status < 300)
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
