package dispatch

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/otapush/otapushtest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// backlogWork is a lane with an endless backlog of one-item changes whose
// every push hands back the lane's next job, a fresh one as the syncer's
// lanes make it: each push renders up to items of them, and can carry
// fewer.
type backlogWork struct {
	clock clock
	items int
}

func (w backlogWork) Begin(_ context.Context, j job.Job) (job.Job, Payload, error) {
	return j, Payload{Body: []byte("items:" + strconv.Itoa(w.items)), Items: w.items}, nil
}

func (w backlogWork) Shrink(_ context.Context, _ job.Job, _ Payload, items int) (Payload, error) {
	if items < 1 {
		return Payload{}, &TooBigError{Items: 1}
	}
	n := min(items, w.items)
	return Payload{Body: []byte("items:" + strconv.Itoa(n)), Items: n}, nil
}

func (w backlogWork) Done(_ context.Context, j job.Job, _ Payload) (*job.Job, error) {
	return &job.Job{ID: j.ID + "+", Channel: j.Channel, Credential: j.Credential, Endpoint: j.Endpoint, FirstSeen: w.clock.Now(), Items: w.items}, nil
}

func (backlogWork) Hold(context.Context, job.Job, time.Time) error { return nil }

// Adversary seed 84: an endpoint metered by items whose vendor halved its
// limit below one push's items. Every push of the lane carried 7 items,
// more than the vendor takes at once; the vendor answered each 429 with
// Retry-After 0, the job failed 9 pushes in a row and was dead-lettered
// "for throttles", naming no change, and the lane's days stayed stale.
// Here the bucket is 5 items/s with a burst of 10 and the vendor, which
// keeps its own log of the items it took, takes 2.5 items/s with a burst
// of 5 and answers every refusal 429 with Retry-After 0. Over two
// simulated minutes the lane's pushes get smaller until the vendor takes
// them, its jobs are never dead-lettered, and the vendor takes items at
// no less than half of its own limit.
func TestItemsPushTheVendorCannotTakeIsSentSmaller(t *testing.T) {
	c := limitertest.NewClock(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC))
	vendorLimit := window.Limit{Rate: 2.5, Burst: 5}
	var taken []time.Time
	var sizes []int
	refused := 0
	vendor := otapushtest.NewVendor(t, countingItems(func(n int) otapushtest.Answer {
		with := slices.Clone(taken)
		for range n {
			with = append(with, c.Now())
		}
		if window.Check(with, vendorLimit) != nil {
			refused++
			return otapushtest.Answer{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"0"}}}
		}
		taken, sizes = with, append(sizes, n)
		return otapushtest.Answer{}
	}))
	lim := limitertest.New(limitertest.WithClock(c.Now), limitertest.WithSleep(c.Sleep))
	quiet := slog.New(slog.DiscardHandler)
	client := otapushtest.NewClient(t, lim, c.Now, c.Sleep)
	route := Route{Bucket: limiter.Bucket{Key: "bk#c#rates", Limit: limiter.PerSecond(5, 10)}, URL: vendor.URL, Header: http.Header{}, ItemWeight: 1}
	q := &fakeQueue{}
	d := &worker{Dispatcher: &Dispatcher{Limiter: lim, Pusher: client, Queue: q, Policy: DefaultPolicy,
		Now: c.Now, Sleep: c.Sleep, Log: quiet}, Work: backlogWork{clock: c, items: 7}, Routes: fixedRoute(route)}
	start := c.Now()
	j := job.Job{ID: "lane@t", Channel: "bk", Credential: "c", Endpoint: "rates", FirstSeen: c.Now(), Items: 7}
	for c.Now().Sub(start) < 2*time.Minute {
		res, err := d.HandleJob(t.Context(), j)
		if err != nil {
			t.Fatal(err)
		}
		if len(q.dead) > 0 {
			t.Fatalf("at %v the lane's job was dead-lettered: %s", c.Now().Sub(start), q.dead[0])
		}
		if res.Outcome != Deferred || len(q.deferred) == 0 {
			t.Fatalf("job %s at %v: %s (%s), want the lane's jobs deferred in turn", j.ID, c.Now().Sub(start), res.Outcome, res.Reason)
		}
		last := q.deferred[len(q.deferred)-1]
		j = last.j
		_ = c.Sleep(t.Context(), max(last.wait, time.Millisecond))
	}
	vendor.Sync(func() {}) // the answers' records are the test's to read after it
	if err := window.Check(taken, vendorLimit); err != nil {
		t.Fatalf("the vendor's own log: %v", err)
	}
	floor := vendorLimit.Bound(2*time.Minute) / 2
	if float64(len(taken)) < floor {
		t.Fatalf("the vendor took %d items in 2 minutes (requests it took %v, %d refused), want at least %.0f", len(taken), sizes, refused, floor)
	}
	t.Logf("the vendor took %d items in %d requests (sizes %v) and refused %d", len(taken), len(sizes), sizes, refused)
}
