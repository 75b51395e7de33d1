package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// hotelsConfig is n hotels on one credential of booking_com (hotel-h,
// hotel ref BK-(1000+h)).
func hotelsConfig(lim limiter.Limit, n int, extra string) func(string) string {
	props := make([]string, n)
	for h := range n {
		props[h] = fmt.Sprintf(`"hotel-%d": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-%d"}]`, h, 1000+h)
	}
	return connconfig.Booking(lim, extra, strings.Join(props, ","))
}

// With the limiter's table failing mid-run, a shadow endpoint keeps
// pushing every change at once (it never needed the slot to push) and
// records that enforcement would have deferred them; nothing is deferred,
// lost or dead-lettered.
func TestShadowPushesThroughALimiterOutage(t *testing.T) {
	const hotels = 6
	lim := limiter.PerSecond(2, 2)
	m := newMemLanes(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceNone}, hotelsConfig(lim, hotels, `, "mode": "shadow", "margin": "0s"`), nil)
	srcs := make([]*pmsOracle, hotels)
	for h := range srcs {
		srcs[h] = newPMSOracle(fmt.Sprintf("hotel-%d", h))
	}
	wave := func(n int) {
		var bodies []string
		for h, src := range srcs {
			day := time.Date(2027, 4, 1+n, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
			bodies = append(bodies, src.change("rates", "TWN", day, day, 10*n+h))
		}
		m.changes(bodies, 1)
		m.drain(100)
	}
	wave(0)
	before := len(m.results)
	m.limiterDown.Store(true)
	wave(1)
	during := slices.Clone(m.results[before:])
	m.limiterDown.Store(false)
	wave(2)

	for h, src := range srcs {
		src.assertNewest(t, m.ota, fmt.Sprintf("BK-%d", 1000+h))
	}
	pushedDuring := 0
	for _, res := range during {
		if res.Pushes > 0 {
			pushedDuring++
			if !res.StoreError || !res.ShadowWouldDefer {
				t.Errorf("push during the outage %s: store error %v, would defer %v; want both (enforcement would have failed closed)", res.JobID, res.StoreError, res.ShadowWouldDefer)
			}
		}
	}
	if pushedDuring != hotels {
		t.Errorf("%d pushes during the outage, want %d (one per lane)", pushedDuring, hotels)
	}
	for _, res := range m.results {
		if res.Outcome == dispatch.Deferred {
			t.Errorf("shadow job %s deferred (%s), want pushed", res.JobID, res.Reason)
		}
	}
	if dlq := m.sent.deadLetters(deadURL); len(dlq) != 0 {
		t.Errorf("dead-lettered %d messages: %v", len(dlq), reasons(dlq))
	}
	t.Logf("%d changes in 3 waves, the limiter's table down for the second: %d OTA requests, %d of them during the outage", 3*hotels, len(m.ota.Accepted()), pushedDuring)
}
