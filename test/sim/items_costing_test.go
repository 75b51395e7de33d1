package sim

import (
	"context"
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
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/internal/vendoritems"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// An endpoint metered by items: every change reaches the OTA, changes of
// a day to a month alike, while the vendor answers some attempts 503 or
// 429; each push carries as many items as the tokens its slot could book
// (so pushes number about items ÷ burst, not one per change); and the
// items never exceed the limit. That is checked with the mock's own
// window code (package window, not sdk/gcra) on what the limiter granted
// (every token at its slot, retries included: burst + rate·W in every
// window, no slack) and on what the vendor metered, and the vendor
// metered no item that was not booked: every attempt, failed ones too,
// paid for what it carried. The subject
// is the dispatcher's item accounting, not the store: one worker on the
// in-memory DynamoDB and the manual clock, which the vendor shares.
func TestItemsCostingKeepsTheVendorItemCounter(t *testing.T) {
	const rate, burst = 40.0, 20
	itemLimit := limiter.PerSecond(rate, burst)
	sent := &slotLog{slots: map[string]time.Time{}}
	granted := &grantLog{}
	var pushes atomic.Int64
	var m *memLanes
	// The mock meters requests; it must not be what limits this test.
	m = newMemLanes(t, mockota.Config{Limit: limiter.PerSecond(1000, 1000)},
		connconfig.Booking(itemLimit, `, "cost": "items"`, auroraBK1001), func(d *dispatch.Dispatcher) {
			// m is set by the time the first push runs: these read it then.
			now := func() time.Time { return m.clock.Now() }
			sleep := func(ctx context.Context, d time.Duration) error { return m.sleep(ctx, d) }
			lim := recordingLimiter{d.Limiter.(*limiter.Limiter), granted, sleep}
			client, err := otapush.New(nil, lim, otapush.DefaultPolicy, otapush.WithClock(now),
				otapush.WithLogger(slog.New(slog.DiscardHandler)), otapush.WithSleep(sleep))
			if err != nil {
				t.Fatal(err)
			}
			d.Limiter = lim
			d.Pusher = slotRecorder{faultyVendor{client, func() *mockota.Server { return m.ota }, &pushes}, sent}
		})
	src := newPMSOracle("hotel-aurora")
	total := 0
	for i := range 24 { // 24 changes of 1 to 31 days on distinct dates: 212 items
		n := []int{1, 2, 3, 4, 12, 31}[i%6]
		from := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, total)
		src.change("rates", "DBL", from.Format(ari.DateLayout), from.AddDate(0, 0, n-1).Format(ari.DateLayout), i)
		total += n
	}
	m.changes(src.bodies, 10)
	m.drain(500)

	accepted := m.ota.Accepted()
	items := make([]int, len(accepted))
	sum := 0
	for i, req := range accepted {
		items[i] = vendoritems.Count(t, req.Body)
		slot, ok := sent.slots[req.JobID]
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
		t.Errorf("the tokens the worker booked: %v", err)
	}
	metered := vendoritems.Arrivals(t, m.ota.Requests())
	if len(metered) > len(granted.at) {
		t.Errorf("the vendor metered %d items, but the worker booked %d tokens: some attempt sent items it did not pay for", len(metered), len(granted.at))
	}
	// The vendor shares the manual clock, so its own item counter is held
	// to the same bound: each attempt arrives at its slot.
	if err := window.Check(metered, lim); err != nil {
		t.Errorf("the items the vendor metered: %v", err)
	}
	failed := len(m.ota.Requests()) - len(accepted)
	if failed == 0 || m.ota.Count429() == 0 {
		t.Errorf("%d attempts failed, %d of them 429s; want the vendor's failures exercised", failed, m.ota.Count429())
	}
	if sum != total {
		t.Errorf("the pushes carried %d items, want each of the %d once", sum, total)
	}
	// 212 items at 20 a push is 11 pushes; a push short by a change that
	// did not fit whole adds a few, never one per change.
	if most := total/burst + 8; len(accepted) > most {
		t.Errorf("%d pushes for %d items at %d a push, want at most %d", len(accepted), total, burst, most)
	}
	src.assertNewest(t, m.ota, "BK-1001")
	booked, _ := window.Fullest(granted.at, lim)
	arrived, _ := window.Fullest(metered, lim)
	t.Logf("%d pushes, %d failed attempts (%d 429s); %d tokens booked, %d items metered; fullest booked window %v; fullest window at the vendor %v; items per push %v",
		len(accepted), failed, m.ota.Count429(), len(granted.at), len(metered), booked, arrived, items)
}

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

// grantLog is every token the limiter granted, at its slot: the schedule
// the worker booked, for the window check.
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

// recordingLimiter is the worker's real limiter that logs what it grants:
// slots the dispatcher reserves (one job, a batch, or ahead by the
// store's latency) and the retries otapush waits for.
type recordingLimiter struct {
	*limiter.Limiter
	log   *grantLog
	sleep func(context.Context, time.Duration) error
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

func (l recordingLimiter) ReserveAhead(ctx context.Context, b limiter.Bucket, n int, maxDelay, ahead time.Duration) (limiter.Reservation, error) {
	r, err := l.Limiter.ReserveAhead(ctx, b, n, maxDelay, ahead)
	if err == nil {
		l.log.add(n, r.Slot)
	}
	return r, err
}

// Wait books as Reserve does and sleeps to the slot on the manual clock:
// the limiter's own Wait sleeps by the wall clock, while the manual clock
// stood still the retry would reach the vendor before its slot.
func (l recordingLimiter) Wait(ctx context.Context, b limiter.Bucket, n int, maxWait time.Duration) (limiter.Reservation, error) {
	r, err := l.Reserve(ctx, b, n, maxWait)
	if err != nil {
		return r, err
	}
	return r, l.sleep(ctx, r.Slot.Sub(l.Now()))
}

// faultyVendor makes the mock vendor answer a push's first attempt with a
// failure now and then (the mock still meters the attempt and the
// retry): every third push a 503, every seventh a 429.
type faultyVendor struct {
	next dispatch.Pusher
	ota  func() *mockota.Server
	n    *atomic.Int64
}

func (f faultyVendor) Push(ctx context.Context, req otapush.Request) (otapush.Response, error) {
	switch k := f.n.Add(1); {
	case k%7 == 0:
		f.ota().FailNext(req.JobID, 429, 1)
	case k%3 == 0:
		f.ota().FailNext(req.JobID, 503, 1)
	}
	return f.next.Push(ctx, req)
}
