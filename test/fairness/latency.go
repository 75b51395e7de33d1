package fairness

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"
)

// A grant's latency is how late its request leaves otapush: after the
// slot the limiter granted (what a margin must cover, since the vendor
// counts requests when they arrive), and after the grant's write returned,
// for grants due at once (for a later slot, Wait sleeps on purpose).

// grantClock is one pusher's last grant, set by Wait and by the store
// wrapper, read when the request it paid for is sent.
type grantClock struct {
	mu          sync.Mutex
	slot, wrote time.Time // zero once used
}

type grantClockKey struct{}

func clockOf(ctx context.Context) *grantClock {
	c, _ := ctx.Value(grantClockKey{}).(*grantClock)
	return c
}

func (c *grantClock) written(at time.Time) {
	if c != nil {
		c.mu.Lock()
		c.wrote = at
		c.mu.Unlock()
	}
}

func (c *grantClock) granted(slot time.Time) {
	if c != nil {
		c.mu.Lock()
		c.slot = slot
		c.mu.Unlock()
	}
}

// latencies collects, per request sent, slot → send and (grants due at
// once) write → send, in µs.
type latencies struct {
	mu                  sync.Mutex
	fromSlot, fromWrite []int64
	slots               []int64 // the slot (unix µs) of each fromSlot
}

// sent records the request leaving at `at` for the grant in c.
func (l *latencies) sent(c *grantClock, at time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	slot, wrote := c.slot, c.wrote
	c.slot, c.wrote = time.Time{}, time.Time{}
	c.mu.Unlock()
	if slot.IsZero() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fromSlot = append(l.fromSlot, at.Sub(slot).Microseconds())
	l.slots = append(l.slots, slot.UnixMicro())
	if !wrote.IsZero() && !slot.After(wrote) {
		l.fromWrite = append(l.fromWrite, at.Sub(wrote).Microseconds())
	}
}

// timedTransport stamps each request as it leaves the HTTP client.
type timedTransport struct {
	next http.RoundTripper
	lat  *latencies
}

func (t timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.lat.sent(clockOf(req.Context()), time.Now())
	return t.next.RoundTrip(req)
}

// LatencyReport is a distribution in milliseconds.
type LatencyReport struct {
	N   int     `json:"n"`
	Min float64 `json:"min_ms"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

func latencyReport(us []int64) LatencyReport {
	if len(us) == 0 {
		return LatencyReport{}
	}
	s := slices.Clone(us)
	slices.Sort(s)
	at := func(q float64) float64 { return float64(s[min(int(q*float64(len(s))), len(s)-1)]) / 1000 }
	return LatencyReport{N: len(s), Min: float64(s[0]) / 1000, P50: at(0.5), P99: at(0.99), Max: float64(s[len(s)-1]) / 1000}
}
