package dispatch

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// slowStore is limitertest's limiter answering every call 5 ms after it
// decided, as the store's conditional writes would.
func slowStore() *limitertest.Limiter {
	return limitertest.New(limitertest.WithLatency(func(string, string) time.Duration { return 5 * time.Millisecond }))
}

// asks is how many reservations (turns and asks) lim was asked, and how
// many of them asked key.
func asks(lim *limitertest.Limiter, key string) (all, ofKey int) {
	for _, c := range lim.Calls() {
		if c.Op == "Reserve" || c.Op == "ReserveAhead" {
			all++
			if c.Key == key {
				ofKey++
			}
		}
	}
	return all, ofKey
}

// Ten jobs of a route that takes only tokens free at once (a resync's bulk
// pushes: burst 1, a 1 ms horizon) wait on one bucket in one process. Each
// asking at every free token cost about one denied write per waiting job
// per token (measured in the simulated onboarding: 4.5 failed limiter
// writes a bulk push); in turn, a token costs about one ask, and the
// bucket's rate is still used: the ten pushes go out at the bucket's pace
// (the vendor's window holds), the last within ten intervals and a little.
func TestOneAskerPerBucketDrainsAtTheRateWithoutPolling(t *testing.T) {
	ms := time.Millisecond
	limit := limiter.Limit{Rate: 10, Burst: 1}
	route := Route{Bucket: limiter.Bucket{Key: "ota#c#rates", Limit: limit}, URL: "http://ota.invalid", Header: http.Header{},
		Horizon: ms, OneAsker: true}
	synctest.Test(t, func(t *testing.T) {
		store := slowStore()
		vendor := &arrivals{at: map[string][]time.Time{}}
		policy := DefaultPolicy
		policy.MaxHold = 5 * time.Second
		d := &worker{&Dispatcher{Limiter: store, Pusher: vendor, Queue: &fakeQueue{}, Policy: policy, Can: Capabilities{Ahead: store.ReserveAhead}}, nil, fixedRoute(route)}
		t0 := time.Now()
		js := make([]job.Job, 10)
		for i := range js {
			js[i] = job.Job{ID: fmt.Sprintf("bulk-%d", i), Channel: "ota", Credential: "c", Endpoint: "rates", FirstSeen: t0, Payload: []byte(`{}`)}
		}
		results, errs := d.HandleJobs(t.Context(), js)
		for i, res := range results {
			if errs[i] != nil || res.Outcome != Pushed {
				t.Errorf("%s: %+v, err %v; want pushed", js[i].ID, res, errs[i])
			}
		}
		at := vendor.at[route.Bucket.Key]
		if len(at) != 10 {
			t.Fatalf("%d pushes, want 10", len(at))
		}
		if err := window.Check(at, window.Limit{Rate: limit.Rate, Burst: limit.Burst}); err != nil {
			t.Errorf("the vendor's window: %v", err)
		}
		if last := at[len(at)-1].Sub(t0); last > 10*100*ms {
			t.Errorf("the last push went %v after the first asks, want within 1 s (ten intervals of 100 ms): the rate went unused", last)
		}
		all, denied := asks(store, route.Bucket.Key)
		denied -= len(at) // each push spent one grant
		if denied > 2 {
			t.Errorf("%d reservations asked for 10 grants, %d of the bucket denied; want at most 2 denied", all, denied)
		}
		t.Logf("%d reservations asked for 10 grants, %d of the bucket denied; last push %v after the first asks", all, denied, at[len(at)-1].Sub(t0))
	})
}

// Ten such jobs wait on one bucket spread over five processes, two each,
// as the deferred queue spreads a resync's bulk jobs over the execution
// environments. Asking in turn within each process, every process asked
// at every free token: five asks a token while all had jobs, four of them
// denied writes (in the simulated onboarding, 5.2 failed limiter writes a
// bulk push at 10 hotels a bucket, 11 at 30). Asking at turns booked in
// the bucket's ask queue, each push costs its turn's write and its ask,
// and the rate is still used.
func TestBulkJobsOfSeveralProcessesAskTheirBucketAtOneTurnEach(t *testing.T) {
	ms := time.Millisecond
	limit := limiter.Limit{Rate: 10, Burst: 1}
	route := Route{Bucket: limiter.Bucket{Key: "ota#c#rates", Limit: limit}, URL: "http://ota.invalid", Header: http.Header{},
		Horizon: ms, OneAsker: true}
	synctest.Test(t, func(t *testing.T) {
		store := slowStore()
		vendor := &arrivals{at: map[string][]time.Time{}}
		policy := DefaultPolicy
		policy.MaxHold = 5 * time.Second
		t0 := time.Now()
		var wg sync.WaitGroup
		for p := range 5 {
			d := &worker{&Dispatcher{Limiter: store, Pusher: vendor, Queue: &fakeQueue{}, Policy: policy, Can: Capabilities{Ahead: store.ReserveAhead}}, nil, fixedRoute(route)}
			js := make([]job.Job, 2)
			for i := range js {
				js[i] = job.Job{ID: fmt.Sprintf("bulk-%d-%d", p, i), Channel: "ota", Credential: "c", Endpoint: "rates", FirstSeen: t0, Payload: []byte(`{}`)}
			}
			wg.Go(func() {
				results, errs := d.HandleJobs(t.Context(), js)
				for i, res := range results {
					if errs[i] != nil || res.Outcome != Pushed {
						t.Errorf("%s: %+v, err %v; want pushed", js[i].ID, res, errs[i])
					}
				}
			})
		}
		wg.Wait()
		at := vendor.at[route.Bucket.Key]
		if len(at) != 10 {
			t.Fatalf("%d pushes, want 10", len(at))
		}
		if err := window.Check(at, window.Limit{Rate: limit.Rate, Burst: limit.Burst}); err != nil {
			t.Errorf("the vendor's window: %v", err)
		}
		if last := at[len(at)-1].Sub(t0); last > 11*100*ms {
			t.Errorf("the last push went %v after the first asks, want within 1.1 s (ten intervals of 100 ms and the store's answers): the rate went unused", last)
		}
		all, denied := asks(store, route.Bucket.Key)
		denied -= len(at)
		if denied > 2 {
			t.Errorf("%d writes (turns and asks) for 10 grants, %d of the bucket denied; want at most 2 denied", all, denied)
		}
		t.Logf("%d writes (turns and asks) for 10 grants, %d of the bucket denied; last push %v after the first asks", all, denied, at[len(at)-1].Sub(t0))
	})
}

// A live push booked the bucket off the turns' beat: its token ends 20 ms
// after the bulk job's turn, 80 ms before the next turn. Booking its next
// turn, the job left those 80 ms unused (the next turn is an interval
// after this one); it asks again at the free token the denial names (in
// the simulated onboarding at 30 hotels a bucket, 8.3% of the quota live
// traffic leaves was lost while every lane had bulk work, 6.6% asking
// again).
func TestBulkJobDeniedOffTheTurnsBeatAsksAgainAtTheFreeToken(t *testing.T) {
	ms := time.Millisecond
	limit := limiter.Limit{Rate: 10, Burst: 1}
	route := Route{Bucket: limiter.Bucket{Key: "ota#c#rates", Limit: limit}, URL: "http://ota.invalid", Header: http.Header{},
		Horizon: ms, OneAsker: true}
	synctest.Test(t, func(t *testing.T) {
		lim := limitertest.New()
		if _, err := lim.Reserve(t.Context(), limiter.Bucket{Key: route.Bucket.Key, Limit: limiter.Limit{Rate: 10, Burst: 20}}, 1, time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(70 * ms) // the live token ends 30 ms from now
		vendor := &arrivals{at: map[string][]time.Time{}}
		d := &worker{&Dispatcher{Limiter: lim, Pusher: vendor, Queue: &fakeQueue{}, Policy: DefaultPolicy}, nil, fixedRoute(route)}
		t1 := time.Now()
		j := job.Job{ID: "bulk", Channel: "ota", Credential: "c", Endpoint: "rates", FirstSeen: t1, Payload: []byte(`{}`)}
		res, errs := d.HandleJobs(t.Context(), []job.Job{j})
		if errs[0] != nil || res[0].Outcome != Pushed {
			t.Fatalf("%+v, %v; want pushed", res[0], errs[0])
		}
		at := vendor.at[route.Bucket.Key]
		if got := at[0].Sub(t1); got < 30*ms || got > 40*ms {
			t.Errorf("pushed %v after it began, want 30 to 40 ms (the live token's end): the rest of the interval went unused", got)
		}
	})
}
