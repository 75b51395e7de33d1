package dispatch

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// arrivals records when each push reached the vendor, by bucket.
type arrivals struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (a *arrivals) Push(_ context.Context, req otapush.Request) (otapush.Response, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at[req.Bucket.Key] = append(a.at[req.Bucket.Key], time.Now())
	return otapush.Response{Attempts: 1}, nil
}

// slowWork is a lane's claim and render before its push: each job's
// takes its lane's latency (by job ID), 2 ms for any other.
type slowWork map[string]time.Duration

func (w slowWork) Begin(_ context.Context, j job.Job) (job.Job, Payload, error) {
	d, ok := w[j.ID]
	if !ok {
		d = 2 * time.Millisecond
	}
	time.Sleep(d)
	return j, Payload{Body: []byte(`{}`), Items: 1}, nil
}

func (slowWork) Done(context.Context, job.Job, Payload) (*job.Job, error) { return nil, nil }
func (slowWork) Hold(context.Context, job.Job, time.Time) error           { return nil }

// byJob routes each job to the route named by its Endpoint.
type byJob map[string]Route

func (r byJob) Route(j job.Job) (Route, error) { return r[j.Endpoint], nil }

// A lingering job whose bucket is full already books its early slot at
// once, at the now of its batch's write, and the vendor counts its push
// when it arrives; the bucket's margin (100 ms) covers how much later than
// its slot that is. The same change batch wakes lanes of a second bucket
// whose store answers in 90 ms (another partition, a slow write). Were the
// full bucket's jobs to wait for that answer before they begin, the first
// would claim, render (30 ms) and push 120 ms after its slot, beside the
// burst another worker's due jobs take meanwhile (at 120 ms): 21 requests
// in 82 ms against a burst of 20. Each group's jobs start as soon as their
// own booking returns (5 ms), and the window holds. (A simulated
// 400-property storm with FillQuota found 40 sends in 1.897 s against a
// bound of 39.97 so, before buckets kept a margin; with the margin, its
// lingering jobs still began up to 47 ms after their slots, waiting for
// their batch's other writes, before a claim and render of up to 65 ms.)
func TestLingerYieldNeverOverspendsTheWindow(t *testing.T) {
	ms := time.Millisecond
	// 10/s, burst 20, the default 100 ms margin: 19 tokens at once.
	limit := limiter.Limit{Rate: 10, Burst: 20, Margin: 100 * ms}
	full := Route{Bucket: limiter.Bucket{Key: "ota#c#rates", Limit: limit}, URL: "http://ota.invalid", Header: http.Header{}}
	other := Route{Bucket: limiter.Bucket{Key: "ota#c#availability", Limit: limit}, URL: "http://ota.invalid", Header: http.Header{}}
	synctest.Test(t, func(t *testing.T) {
		// Each booking of a bucket is answered after that bucket's
		// latency, as a store's: the grant is decided at the now the call
		// read, and the caller hears of it later (in the bubble's time).
		latency := map[string]time.Duration{full.Bucket.Key: 5 * ms, other.Bucket.Key: 90 * ms}
		store := limitertest.New(limitertest.WithLatency(func(_, key string) time.Duration { return latency[key] }))
		vendor := &arrivals{at: map[string][]time.Time{}}
		d := &worker{&Dispatcher{Limiter: store, Pusher: vendor,
			Queue: &fakeQueue{}, Policy: DefaultPolicy, Can: Capabilities{Batch: store.ReserveBatch}}, slowWork{"rates-0@tok": 30 * ms, "rates-1@tok": 30 * ms}, byJob{"rates": full, "availability": other}}
		t0 := time.Now()
		jobs := func(endpoint string, n int, linger bool) []job.Job {
			js := make([]job.Job, n)
			for i := range js {
				js[i] = job.Job{ID: fmt.Sprintf("due-%s-%d@tok", endpoint, i), Channel: "ota", Credential: "c", Endpoint: endpoint, FirstSeen: t0}
				if linger {
					js[i].ID = fmt.Sprintf("%s-%d@tok", endpoint, i)
					js[i].NotBefore, js[i].Linger = t0.Add(time.Second), true
				}
			}
			return js
		}
		handle := func(what string, js []job.Job) {
			results, errs := d.HandleJobs(t.Context(), js)
			for i, res := range results {
				if errs[i] != nil || res.Outcome != Pushed {
					t.Errorf("%s %s: %+v, err %v; want pushed", what, js[i].ID, res, errs[i])
				}
			}
		}
		var wg sync.WaitGroup
		// A change batch wakes two lanes of each bucket: they linger, and
		// book their early slots together (the full bucket's at 0 and
		// 100 ms).
		wg.Go(func() { handle("lingering", append(jobs("rates", 2, true), jobs("availability", 2, true)...)) })
		// Another worker's batch of due jobs takes what the full bucket
		// has left meanwhile: 18 slots at once, one at 200 ms.
		wg.Go(func() {
			time.Sleep(120 * ms)
			handle("due", jobs("rates", 19, false))
		})
		wg.Wait()
		at := vendor.at[full.Bucket.Key]
		if len(at) != 21 {
			t.Fatalf("%d pushes on %s, want 21", len(at), full.Bucket.Key)
		}
		if err := window.Check(at, window.Limit{Rate: limit.Rate, Burst: limit.Burst}); err != nil {
			var after []time.Duration
			for _, a := range at {
				after = append(after, a.Sub(t0))
			}
			t.Errorf("%s: %v; arrivals after the batch: %v", full.Bucket.Key, err, after)
		}
	})
}
