package dispatch

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// regroupWork is a lane whose push goes as messages of the sizes given
// (a format's split: the first of one date, the others larger than a
// request may carry), and whose push rendered again packs the oldest
// changes into one message of at most the items asked, as the syncer's
// Shrink does (whole changes, in age order).
type regroupWork struct{ sizes []int }

func (w regroupWork) Begin(_ context.Context, j job.Job) (job.Job, Payload, error) {
	p := Payload{}
	for _, n := range w.sizes {
		p.Items += n
		p.Messages = append(p.Messages, Message{Body: []byte("items:" + strconv.Itoa(n)), Items: n})
	}
	return j, p, nil
}

func (w regroupWork) Shrink(_ context.Context, _ job.Job, p Payload, items int) (Payload, error) {
	if items < 1 {
		return Payload{}, &TooBigError{Items: 1}
	}
	n := min(items, p.Items)
	return Payload{Items: n, Messages: []Message{{Body: []byte("items:" + strconv.Itoa(n)), Items: n}}}, nil
}

func (regroupWork) Done(context.Context, job.Job, Payload) (*job.Job, error) { return nil, nil }
func (regroupWork) Hold(context.Context, job.Job, time.Time) error           { return nil }

// A push rendered again because one of its messages carries more items
// than a request may (charge's over) carries what its tokens pay for, not
// what a request may: its slot paid for the first message's one item, and
// packed again up to the bucket's capacity of 3 the push sent 3 items on
// 1 token (adversary seed 427: two such pushes half a second apart, 6
// items where burst 4 + 2/s allows 5). Jobs that expect no items (a slot
// of one token) push 31 items in messages of 1, 10, 10 and 10 at 2/s,
// burst 4, margin 100 ms, back to back for 30 s: the vendor's item
// counter stays within burst + rate·W.
func TestAPushRenderedAgainCarriesWhatItsTokensPayFor(t *testing.T) {
	c := limitertest.NewClock(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC))
	vendor := &itemsVendor{clock: c}
	route := itemsRoute
	route.Bucket = limiter.Bucket{Key: "bk#c#availability", Limit: limiter.Limit{Rate: 2, Burst: 4, Margin: 100 * time.Millisecond}}
	route.LocalShare = false
	lim := bucketAt(t, c, route.Bucket, 0)
	d := &worker{&Dispatcher{Limiter: lim, Pusher: vendor, Queue: &fakeQueue{}, Policy: DefaultPolicy,
		Now: c.Now, Sleep: c.Sleep, Can: reserveAndBatch(lim)}, regroupWork{sizes: []int{1, 10, 10, 10}}, fixedRoute(route)}
	start := c.Now()
	for c.Now().Sub(start) < 30*time.Second {
		j := job.Job{ID: "lane@t", Channel: "bk", Credential: "c", Endpoint: "availability", FirstSeen: c.Now()}
		res, err := d.HandleJob(t.Context(), j)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == Deferred {
			_ = c.Sleep(t.Context(), max(res.Wait, time.Millisecond))
		}
	}
	if len(vendor.items) == 0 {
		t.Fatal("nothing was pushed")
	}
	if err := window.Check(vendor.at, window.Limit{Rate: 2, Burst: 4}); err != nil {
		t.Fatalf("the vendor's item counter: %v (items a push %v)", err, vendor.items)
	}
	t.Logf("%d items in %d pushes over 30 s", len(vendor.at), len(vendor.items))
}
