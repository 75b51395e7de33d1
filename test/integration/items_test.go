package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
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

// assertItemWindows checks the vendor's item counter: in every window
// [a, b] of arrivals, the items number at most burst + rate·(b − a +
// slack). Counted here, not with sdk/gcra.
func assertItemWindows(t *testing.T, at []time.Time, items []int, rate float64, burst int, slack time.Duration) {
	t.Helper()
	idx := make([]int, len(at))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return at[idx[a]].Before(at[idx[b]]) })
	worst := 0.0
	for i := range idx {
		sum := 0
		for j := i; j < len(idx); j++ {
			sum += items[idx[j]]
			w := at[idx[j]].Sub(at[idx[i]]) + slack
			bound := float64(burst) + rate*w.Seconds()
			if float64(sum) > bound+1e-9 {
				t.Fatalf("%d items in a window of %v exceed burst %d + %v/s × window = %.1f", sum, at[idx[j]].Sub(at[idx[i]]), burst, rate, bound)
			}
			worst = max(worst, float64(sum)/bound)
		}
	}
	t.Logf("%d pushes; the fullest item window used %.0f%% of its bound", len(at), worst*100)
}

// An endpoint metered by items: the vendor's item counter stays within
// its limit, every change reaches the OTA, and each push carries as many
// items as the tokens its slot could book (so pushes number about items ÷
// burst, not one per change).
func TestItemsCostingKeepsTheVendorItemCounter(t *testing.T) {
	const rate, burst = 40.0, 20
	itemLimit := limiter.PerSecond(rate, burst)
	// The mock meters requests; it must not be what limits this test.
	r := newLaneRig(t, itemLimit, mockota.Config{Limit: limiter.PerSecond(1000, 1000)},
		oneHotelConfig(itemLimit, `, "cost": "items"`))
	r.linger = 200 * time.Millisecond
	sent := &slotLog{slots: map[string]time.Time{}}
	r.tune = func(d *dispatch.Dispatcher) { d.Pusher = slotRecorder{d.Pusher, sent} }
	src := newPMS("hotel-aurora")
	total := 0
	for i := range 40 { // 40 changes of 1–4 days, 100 items, on distinct dates
		n := 1 + i%4
		from := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, total)
		src.change("rates", "DBL", from.Format(ari.DateLayout), from.AddDate(0, 0, n-1).Format(ari.DateLayout), i)
		total += n
	}
	r.enqueueBodies(src.bodies)
	r.run(2, 2*time.Minute, 30*time.Second)

	slots := sent.slots
	accepted := r.ota.Accepted()
	at, items := make([]time.Time, len(accepted)), make([]int, len(accepted))
	sum := 0
	var late time.Duration // the most a push reached the vendor after its slot
	for i, req := range accepted {
		at[i], items[i] = req.At, itemsIn(t, req.Body)
		slot, ok := slots[req.JobID]
		switch {
		case !ok:
			t.Errorf("push %s reached the OTA without going through the dispatcher", req.JobID)
		case req.At.Before(slot):
			t.Errorf("push %s reached the OTA at %v, before its slot %v", req.JobID, req.At, slot)
		default:
			late = max(late, req.At.Sub(slot))
		}
		if items[i] > burst {
			t.Errorf("push %d carried %d items, more than the burst of %d one instant may take", i, items[i], burst)
		}
		sum += items[i]
	}
	// A push's tokens are booked for its slot and it reaches the vendor up
	// to late after it (the claim, the state read and the request between):
	// arrivals in a window [a, b] had slots in [a − late, b].
	t.Logf("pushes reached the OTA at most %v after their slots", late)
	assertItemWindows(t, at, items, rate, burst, late)
	if r.ota.Count429() != 0 {
		t.Errorf("the mock answered %d 429s; it must not limit this test", r.ota.Count429())
	}
	if sum != total {
		t.Errorf("the pushes carried %d items, want each of the %d once", sum, total)
	}
	// 100 items at 20 a push is 5 pushes; a push short by a change that did
	// not fit, and the lane's first push (collected for one linger), add a
	// few, never one per change.
	if most := total/burst + 5; len(accepted) > most {
		t.Errorf("%d pushes for %d items at %d a push, want at most %d", len(accepted), total, burst, most)
	}
	src.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")
	t.Logf("%s", fmt.Sprint("items per push: ", items))
}
