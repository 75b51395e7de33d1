package dispatch

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush/otapushtest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// bucketRouter routes a job to the bucket its credential names, metered
// by items, at the path of that name under its URL.
type bucketRouter struct{ url string }

func (r bucketRouter) Route(j job.Job) (Route, error) {
	return Route{Bucket: limiter.Bucket{Key: j.Credential, Limit: limiter.PerSecond(4, 16)}, URL: r.url + "/" + j.Credential, ItemWeight: 1}, nil
}

// A request throttled to the end of its push halves its lane's requests
// (job.Fit) unless the vendor took as large a request of the same bucket
// within tookFor: then its limit held that size, and the throttle was its
// pace, its requests in flight or its load. Without that, a vendor
// capping its requests in flight halved every lane's requests down to a
// day or two (adversary seed 209: 2.6 items a request, 862 days stale
// after an hour).
func TestAThrottleOfASizeTheVendorTookLeavesFitAlone(t *testing.T) {
	tests := []struct {
		name string
		// took: a push of tookItems items the vendor accepted on bucket
		// tookOn, ago before the throttled push of 8 items on "c".
		tookOn    string
		tookItems int
		ago       time.Duration
		fit       int
	}{
		{"nothing taken: halved", "", 0, 0, 4},
		{"8 taken 10 s before: its pace", "c", 8, 10 * time.Second, 0},
		{"12 taken 10 s before: its pace", "c", 12, 10 * time.Second, 0},
		{"4 taken 10 s before: no proof of 8, halved", "c", 4, 10 * time.Second, 4},
		{"8 taken of another bucket: halved", "other", 8, 10 * time.Second, 4},
		{"8 taken more than a minute before (tookFor): halved", "c", 8, time.Minute + time.Second, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			// The vendor throttles every request of bucket "c" once
			// throttling.
			var throttling atomic.Bool
			v := r.vendor(func(req otapushtest.Request) otapushtest.Answer {
				if throttling.Load() && req.Path == "/c" {
					return otapushtest.Answer{Status: http.StatusTooManyRequests}
				}
				return otapushtest.Answer{}
			})
			r.d.Routes = bucketRouter{url: v.URL}
			r.d.Can.Penalize = r.lim.Penalize
			if tt.tookOn != "" {
				w := &sizedWork{work: work{clock: r.clock}, items: tt.tookItems}
				r.d.Work = w
				j := itemsJob(r.clock.Now(), tt.tookOn, tt.tookItems)
				j.Credential = tt.tookOn
				if res, err := r.d.HandleJob(context.Background(), j); err != nil || res.Outcome != Pushed {
					t.Fatalf("the push the vendor took: %+v, %v", res, err)
				}
				_ = r.clock.Sleep(context.Background(), tt.ago)
			}
			throttling.Store(true)
			r.d.Work = &sizedWork{work: work{clock: r.clock}, items: 8}
			res, err := r.d.HandleJob(context.Background(), itemsJob(r.clock.Now(), "c", 8))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != Deferred || len(r.queue.deferred) != 1 {
				t.Fatalf("%+v, %d deferred; want the throttled job deferred", res, len(r.queue.deferred))
			}
			if got := r.queue.deferred[0].j.Fit; got != tt.fit {
				t.Fatalf("Fit %d after the throttle, want %d", got, tt.fit)
			}
		})
	}
}

// sizedWork pushes items items, and hands back nothing.
type sizedWork struct {
	work
	items int
}

func (w *sizedWork) Begin(_ context.Context, j job.Job) (job.Job, Payload, error) {
	return j, Payload{Body: []byte(fmt.Sprintf("items:%d", w.items)), Items: w.items}, nil
}

func (w *sizedWork) Done(context.Context, job.Job, Payload) (*job.Job, error) { return nil, nil }

// itemsJob is a lane job of credential c expecting items items, holding
// the slot that pays for them.
func itemsJob(now time.Time, c string, items int) job.Job {
	j := testJob(now)
	j.ID, j.Credential, j.Items = "lane-"+c+"@tok", c, items
	j.Hold.At, j.Hold.Tokens, j.Hold.Key = now, items, c
	return j
}
