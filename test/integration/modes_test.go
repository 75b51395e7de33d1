package integration

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/fallback"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// With on_store_unavailable local-share, an outage of the limiter's table
// while changes stream in does not stop the pushes: each process paces
// itself at rate ÷ N, where N counts every worker of both queues, and the
// vendor's own sliding-window check (package window, no sdk/gcra) sees the
// fleet stay within the published limit up to and through the outage
// (its start included). Nothing is lost: the OTA ends with the newest
// value of every date.
func TestLocalShareKeepsPushingThroughALimiterOutage(t *testing.T) {
	const perQueue, hotels = 2, 8
	lim := limiter.PerSecond(4, 4)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim}, hotelsConfig(lim, hotels, `, "on_store_unavailable": "local-share"`))
	// Only the limiter's table fails: the ARI state and the lanes live in
	// DynamoDB too, and with the whole store down nothing could be applied
	// or claimed, let alone pushed. The outage local-share answers is the
	// limiter's.
	r.downTable = r.table
	// Each worker is one process of the fleet: 2 × perQueue of them, the N
	// each local share divides by.
	r.tune = func(d *dispatch.Dispatcher) { d.LocalShare = fallback.New(2 * perQueue) }
	r.linger = 100 * time.Millisecond
	// Eight hotels on one credential: sixteen lanes want more than the
	// bucket's 4/s, so the limit, not the changes, sets the pace.
	srcs := make([]*pms, hotels)
	for h := range srcs {
		srcs[h] = newPMS(fmt.Sprintf("hotel-%d", h))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var bodies []string
	for i := range 200 {
		src := srcs[rng.IntN(hotels)]
		from := time.Date(2026, 12, 20+rng.IntN(20), 0, 0, 0, 0, time.UTC)
		src.change([]string{"availability", "rates"}[rng.IntN(2)], []string{"DBL", "TWN"}[rng.IntN(2)],
			from.Format(ari.DateLayout), from.AddDate(0, 0, rng.IntN(5)).Format(ari.DateLayout), i)
		bodies = append(bodies, src.bodies[len(src.bodies)-1])
	}

	// Changes stream in over 8 s; the limiter's table is down for 4 s of
	// them, from 2 s in.
	var outageFrom, outageTo time.Time
	outage := make(chan struct{})
	r.feeding.Store(true)
	go func() {
		defer close(outage)
		time.Sleep(2 * time.Second)
		outageFrom = time.Now()
		r.down.Store(true)
		time.Sleep(4 * time.Second)
		r.down.Store(false)
		outageTo = time.Now()
	}()
	go func() {
		defer r.feeding.Store(false)
		for _, b := range bodies {
			r.enqueueBodies([]string{b})
			time.Sleep(40 * time.Millisecond)
		}
		<-outage
	}()
	r.run(perQueue, 3*time.Minute, 5*time.Second)

	during := 0
	for _, req := range r.ota.Requests() {
		if !req.At.Before(outageFrom) && req.At.Before(outageTo) {
			during++
		}
	}
	if during == 0 {
		t.Errorf("no OTA request during the %v outage: local-share did not push", outageTo.Sub(outageFrom).Round(time.Millisecond))
	}
	localShares := 0
	for _, res := range r.results {
		localShares += res.LocalShares
	}
	if localShares == 0 {
		t.Error("no push was paced by the local share")
	}
	// Up to and through the outage, every window of what the vendor
	// accepted holds burst + rate·W (its own check, package window), as in
	// the other pipeline tests: what the fleet sent may bunch by network
	// and scheduling jitter (see dispatch.Policy.Grace), which the vendor
	// answers with a 429 that empties the bucket.
	for _, ep := range []string{"availability", "rates"} {
		var upToEnd []time.Time
		for _, at := range r.ota.AcceptedTimes("tok", ep) {
			if at.Before(outageTo) {
				upToEnd = append(upToEnd, at)
			}
		}
		w, broken := window.Fullest(upToEnd, window.Limit{Rate: lim.Rate, Burst: lim.Burst})
		if broken {
			t.Errorf("%s, up to the outage's end: the vendor accepted %v", ep, w)
		}
		t.Logf("%s, up to the outage's end: fullest window accepted %v", ep, w)
	}
	// After it, each process's circuit breaker stays open for its cooldown
	// (5 s here), and a process whose breaker is still open paces itself
	// locally while the others draw from the shared bucket again: for that
	// mixed phase the fleet may exceed the limit, by at most the local
	// shares' rate (shared b + r·W and local ≤ b + r·W with N ≤ b): a
	// known limit of local-share, which the whole run's report shows and
	// bounds at twice the limit.
	if err := r.ota.CheckWindows(); err != nil {
		t.Logf("whole run, accepted requests: %v", err)
	}
	for _, ep := range []string{"availability", "rates"} {
		w, broken := r.ota.FullestWindowSent("tok", ep)
		t.Logf("%s, whole run: fullest window sent %v (over the bound: %v), from %v to %v after the outage began (it lasted 4 s)",
			ep, w, broken, w.From.Sub(outageFrom).Round(time.Millisecond), w.To.Sub(outageFrom).Round(time.Millisecond))
		if w.Ratio() > 2 {
			t.Errorf("%s: the fleet sent %v, over twice the limit", ep, w)
		}
	}
	held := otaCopy(t, r.pipeline)
	for h, src := range srcs {
		src.assertNewest(t, held, fmt.Sprintf("BK-%d", 1000+h))
	}
	if dlq := r.receiveDLQ(); len(dlq) != 0 {
		t.Errorf("dead-lettered %d messages: %v", len(dlq), dlq)
	}
	t.Logf("%d changes → %d OTA requests (%d 429s); %d during the %v outage of the limiter's table, %d pushes paced by the local share (N = %d)",
		len(bodies), len(r.ota.Requests()), r.ota.Count429(), during, outageTo.Sub(outageFrom).Round(time.Millisecond), localShares, 2*perQueue)
}

// hotelsConfig is oneHotelConfig with n hotels on the same credential.
func hotelsConfig(lim limiter.Limit, n int, extra string) func(string) string {
	props := make([]string, n)
	for h := range n {
		props[h] = fmt.Sprintf(`"hotel-%d": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-%d"}]`, h, 1000+h)
	}
	return bookingConfig(lim, extra, strings.Join(props, ","))
}
