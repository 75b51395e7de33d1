package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// slotRecorder records the slot each push was sent for, by job id.
type slotRecorder struct {
	next dispatch.Pusher
	log  *slotLog
}

type slotLog struct {
	mu    sync.Mutex
	slots map[string]time.Time
}

func (s slotRecorder) Push(ctx context.Context, req otapush.Request) (otapush.Response, error) {
	s.log.mu.Lock()
	s.log.slots[req.JobID] = req.Slot
	s.log.mu.Unlock()
	return s.next.Push(ctx, req)
}

// itemsIn counts the dates a push body carries, as the vendor meters them,
// with its own decoding (not sdk/pipeline/syncer's).
func itemsIn(t *testing.T, body []byte) int {
	t.Helper()
	var push struct {
		Items []struct {
			Days []json.RawMessage `json:"days"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &push); err != nil {
		t.Fatalf("push body %s: %v", body, err)
	}
	n := 0
	for _, it := range push.Items {
		n += len(it.Days)
	}
	return n
}

// grantLog is every token the fleet's limiters granted, at its slot: the
// schedule the fleet booked, for the window check (package window, not
// sdk/gcra).
type grantLog struct {
	mu sync.Mutex
	at []time.Time
}

func (g *grantLog) add(n int, slots ...time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range slots {
		for range n {
			g.at = append(g.at, s)
		}
	}
}

// recordingLimiter is a worker's real limiter that logs what it grants:
// slots the dispatcher reserves (one job, or a batch) and the retries
// otapush waits for.
type recordingLimiter struct {
	*limiter.Limiter
	log *grantLog
}

func (l recordingLimiter) Reserve(ctx context.Context, b limiter.Bucket, n int, maxDelay time.Duration) (limiter.Reservation, error) {
	r, err := l.Limiter.Reserve(ctx, b, n, maxDelay)
	if err == nil {
		l.log.add(n, r.Slot)
	}
	return r, err
}

func (l recordingLimiter) ReserveBatch(ctx context.Context, b limiter.Bucket, req limiter.BatchRequest) (limiter.Batch, error) {
	batch, err := l.Limiter.ReserveBatch(ctx, b, req)
	if err == nil {
		l.log.add(1, batch.Slots...)
	}
	return batch, err
}

// ReserveAhead is recorded too: the dispatcher books most lane slots
// ahead by the store's measured latency.
func (l recordingLimiter) ReserveAhead(ctx context.Context, b limiter.Bucket, n int, maxDelay, ahead time.Duration) (limiter.Reservation, error) {
	r, err := l.Limiter.ReserveAhead(ctx, b, n, maxDelay, ahead)
	if err == nil {
		l.log.add(n, r.Slot)
	}
	return r, err
}

func (l recordingLimiter) Wait(ctx context.Context, b limiter.Bucket, n int, maxWait time.Duration) (limiter.Reservation, error) {
	r, err := l.Limiter.Wait(ctx, b, n, maxWait)
	if err == nil {
		l.log.add(n, r.Slot)
	}
	return r, err
}

// faultyVendor makes the mock vendor answer a push's first attempt with a
// failure now and then (a fault-injecting wrapper: the mock still meters
// the attempt and the retry): every third push a 503, every seventh a 429.
type faultyVendor struct {
	next dispatch.Pusher
	ota  *mockota.Server
	n    *atomic.Int64
}

func (f faultyVendor) Push(ctx context.Context, req otapush.Request) (otapush.Response, error) {
	switch k := f.n.Add(1); {
	case k%7 == 0:
		f.ota.FailNext(req.JobID, 429, 1)
	case k%3 == 0:
		f.ota.FailNext(req.JobID, 503, 1)
	}
	return f.next.Push(ctx, req)
}

// An endpoint metered by items: every change reaches the OTA, changes of
// a day to a month alike, while the vendor answers some attempts 503 or
// 429; each push carries as many items as the tokens its slot could book
// (so pushes number about items ÷ burst, not one per change); and the
// items never exceed the limit. That is checked with the mock's own
// window code (package window), not sdk/gcra, on what the limiters
// granted (every token at its slot, retries included: burst + rate·W in
// every window, no slack), and the vendor metered no item that was not
// booked: every attempt, failed ones too, paid for what it carried.
// Pushes reach the vendor after their slots by the claim, render and
// request in between; that lateness is bounded by the dispatcher's grace,
// not by this test.
func TestItemsCostingKeepsTheVendorItemCounter(t *testing.T) {
	const rate, burst = 40.0, 20
	itemLimit := limiter.PerSecond(rate, burst)
	// The mock meters requests; it must not be what limits this test.
	r := newLaneRig(t, itemLimit, mockota.Config{Limit: limiter.PerSecond(1000, 1000)},
		oneHotelConfig(itemLimit, `, "cost": "items"`))
	r.linger = 200 * time.Millisecond
	sent := &slotLog{slots: map[string]time.Time{}}
	granted := &grantLog{}
	var pushes atomic.Int64
	quiet := slog.New(slog.DiscardHandler)
	r.tune = func(d *dispatch.Dispatcher) {
		lim := recordingLimiter{d.Limiter.(*limiter.Limiter), granted}
		client, err := otapush.New(nil, lim, otapush.DefaultPolicy, otapush.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		d.Limiter, d.Pusher = lim, slotRecorder{faultyVendor{client, r.ota, &pushes}, sent}
	}
	src := newPMS("hotel-aurora")
	total := 0
	for i := range 24 { // 24 changes of 1 to 31 days on distinct dates: 212 items
		n := []int{1, 2, 3, 4, 12, 31}[i%6]
		from := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, total)
		src.change("rates", "DBL", from.Format(ari.DateLayout), from.AddDate(0, 0, n-1).Format(ari.DateLayout), i)
		total += n
	}
	r.enqueueBodies(src.bodies)
	r.run(2, 2*time.Minute, 30*time.Second)

	slots := sent.slots
	accepted := r.ota.Accepted()
	items := make([]int, len(accepted))
	sum := 0
	for i, req := range accepted {
		items[i] = itemsIn(t, req.Body)
		slot, ok := slots[req.JobID]
		switch {
		case !ok:
			t.Errorf("push %s reached the OTA without going through the dispatcher", req.JobID)
		case req.At.Before(slot):
			t.Errorf("push %s reached the OTA at %v, before its slot %v", req.JobID, req.At, slot)
		}
		if items[i] > burst {
			t.Errorf("push %d carried %d items, more than the burst of %d one instant may take", i, items[i], burst)
		}
		sum += items[i]
	}
	lim := window.Limit{Rate: rate, Burst: burst}
	if err := window.Check(granted.at, lim); err != nil {
		t.Errorf("the tokens the fleet booked: %v", err)
	}
	metered := itemArrivals(t, r.ota)
	if len(metered) > len(granted.at) {
		t.Errorf("the vendor metered %d items, but the fleet booked %d tokens: some attempt sent items it did not pay for", len(metered), len(granted.at))
	}
	failed := len(r.ota.Requests()) - len(accepted)
	if failed == 0 || r.ota.Count429() == 0 {
		t.Errorf("%d attempts failed, %d of them 429s; want the vendor's failures exercised", failed, r.ota.Count429())
	}
	if sum != total {
		t.Errorf("the pushes carried %d items, want each of the %d once", sum, total)
	}
	// 212 items at 20 a push is 11 pushes; a push short by a change that
	// did not fit whole, and the lane's first push (collected for one
	// linger), add a few, never one per change.
	if most := total/burst + 8; len(accepted) > most {
		t.Errorf("%d pushes for %d items at %d a push, want at most %d", len(accepted), total, burst, most)
	}
	src.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")
	booked, _ := window.Fullest(granted.at, lim)
	arrived, _ := window.Fullest(metered, lim)
	t.Logf("%d pushes, %d failed attempts (%d 429s); %d tokens booked, %d items metered; fullest booked window %v; fullest window at the vendor %v",
		len(accepted), failed, r.ota.Count429(), len(granted.at), len(metered), booked, arrived)
	t.Logf("%s", fmt.Sprint("items per push: ", items))
}
