package integration

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/internal/vendoritems"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// clockedWaiter is a real limiter whose Wait moves the test's clock to the
// slot it booked instead of sleeping until it, as limiter.Wait's sleep
// would: the vendor then sees each attempt exactly at its slot, and its
// window check needs no slack for send jitter.
type clockedWaiter struct {
	*limiter.Limiter
	clock *limitertest.Clock
}

func (w clockedWaiter) Wait(ctx context.Context, b limiter.Bucket, n int, maxWait time.Duration) (limiter.Reservation, error) {
	r, err := w.Reserve(ctx, b, n, maxWait)
	if err == nil && r.Slot.After(w.clock.Now()) {
		w.clock.Set(r.Slot)
	}
	return r, err
}

// itemsBody is a push body of n dates of one cell, in the lane push's shape.
func itemsBody(n int) []byte {
	days := make([]map[string]any, n)
	for i := range days {
		days[i] = map[string]any{"date": time.Date(2027, 1, 1+i, 0, 0, 0, 0, time.UTC).Format("2006-01-02"), "rate": 100 + i}
	}
	body, _ := json.Marshal(map[string]any{"hotel_ref": "BK-1", "kind": "rates", "items": []any{map[string]any{"room_type": "DBL", "days": days}}})
	return body
}

// Issue 17, item 1: a retry on an endpoint metered by items resends the
// whole body, and the vendor counts its items again; it must pay for them
// again. Burst 20 at 40/s: a 20-item push answered 503 and retried on one
// token put 40 items on the vendor within 25 ms, against a bound of 21.
// The clock is the test's, shared by the limiter and the vendor, so the
// vendor's item windows are checked exactly against burst + rate·W.
func TestItemsRetryPaysForTheWholeBody(t *testing.T) {
	t.Parallel()
	const rate, burst = 40.0, 20
	clock := newClock()
	lim, err := limiter.New(emulator.DynamoDB(t), limiter.WithTable(emulator.NewTable(t, emulator.DynamoDB(t))), limiter.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	ota, err := mockota.Start(mockota.Config{Limit: limiter.PerSecond(1000, 1000), Enforce: mockota.EnforceNone, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ota.Close)
	client, err := otapush.New(nil, clockedWaiter{lim, clock}, otapush.DefaultPolicy,
		otapush.WithClock(clock.Now), otapush.WithJitter(func(time.Duration) time.Duration { return time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	bucket := limiter.Bucket{Key: "bk#cred-1#rates", Limit: limiter.PerSecond(rate, burst)}
	ctx := context.Background()
	for i, items := range []int{burst, burst, 12} {
		id := "push-" + string(rune('a'+i))
		// The dispatcher books the first attempt's tokens at the slot.
		r, err := clockedWaiter{lim, clock}.Wait(ctx, bucket, items, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ota.FailNext(id, 503, 1)
		resp, err := client.Push(ctx, otapush.Request{Bucket: bucket, URL: ota.URL() + "/v1/rates", JobID: id,
			Header: map[string][]string{"Authorization": {"Bearer cred-1"}}, Body: itemsBody(items), Reserved: true, Slot: r.Slot, Tokens: items})
		if err != nil || resp.Attempts != 2 {
			t.Fatalf("push %s: %+v, %v; want accepted on its second attempt", id, resp, err)
		}
	}
	at := vendoritems.Arrivals(t, ota.Requests())
	if want := 2 * (burst + burst + 12); len(at) != want {
		t.Fatalf("the vendor metered %d items, want %d (three pushes, each sent twice)", len(at), want)
	}
	if err := window.Check(at, window.Limit{Rate: rate, Burst: burst}); err != nil {
		var b strings.Builder
		for _, r := range ota.Requests() {
			b.WriteString("\n  " + r.At.Format("15:04:05.000000") + " " + r.JobID + " " + strconv.Itoa(r.Status) + " " + strconv.Itoa(vendoritems.Count(t, r.Body)) + " items")
		}
		t.Fatalf("the vendor's item counter: %v%s", err, b.String())
	}
}
