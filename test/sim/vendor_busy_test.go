package sim

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// The fleet of TestPipelineMaxInFlightAgainstAConcurrencyVendor (8
// instances a queue, each with its own lease gate, 40 jobs, a vendor that
// works on 2 requests at once and answers in 200 ms) keeps the vendor's 2
// slots busier than waits that leave with the answer of their start: a
// wait that ends asks the store once more (a slot another process freed
// since, or a fresh answer), and a job deferred comes back about when a
// push under a held slot likely ends (the lease item's last push time)
// rather than a Timeout later. The oracle is the requests' own times, taken
// at the transport: the vendor's busy ratio is their time in flight over
// 2 × the span from the first request to the last answer.
func TestMaxInFlightKeepsTheVendorBusy(t *testing.T) {
	lim := limiter.PerSecond(50, 50)
	for _, store := range []struct {
		name     string
		lat      Latency
		warm     bool // a push held a lease of the set before
		minRatio float64
	}{
		// The bounds are above a fleet whose waits leave with the answer
		// of their start and come back after a push's Timeout (5 s),
		// which keeps the vendor 0.12 to 0.15 busy in these cases at
		// FLEETBUCKET_SIM_SEED 1 to 6. A set no push
		// ever released says nothing of a push's time, so its first
		// waits still ask after a Timeout: at moto's latencies that first
		// wave varies too much for a bound, and the set is warmed first.
		{"DynamoDB", Latency{P50: 5 * time.Millisecond, P99: 25 * time.Millisecond}, false, 0.25},
		{"moto, pushed before", Latency{P50: 52 * time.Millisecond, P99: 170 * time.Millisecond}, true, 0.22},
		{"DynamoDB, pushed before", Latency{P50: 5 * time.Millisecond, P99: 25 * time.Millisecond}, true, 0.3},
	} {
		t.Run(store.name, func(t *testing.T) {
			ota := startOTA(t, mockota.Config{Limit: lim, MaxConcurrent: 2, Latency: 200 * time.Millisecond, Gather: 2, GatherWait: 2 * time.Second})
			synctest.Test(t, func(t *testing.T) {
				f := newPayloadFleet(t, ota, lim, store.lat)
				f.inFlight = &limiter.InFlight{Max: 2, Hold: 10 * time.Second, Timeout: 5 * time.Second}
				if store.warm {
					f.pushedBefore(t, 200*time.Millisecond)
				}
				times := &flightTimes{}
				f.http = &http.Client{Transport: times.around(handlerTransport{h: ota})}
				jobs := payloadJobs(40, "availability")
				f.run(8, jobs, 4*time.Minute)
				f.assertExactlyOnce(jobs)
				busy, span := times.busy(2)
				t.Logf("vendor busy %.2f over %v (%d requests, %d store calls)", busy, span.Round(time.Millisecond), len(ota.Requests()), f.storeCalls())
				if busy > 1 {
					t.Errorf("busy ratio %.2f over 1: more than 2 requests in flight at once", busy)
				}
				if busy < store.minRatio {
					t.Errorf("the vendor was busy %.2f of its 2 slots' time over %v, want at least %.2f", busy, span.Round(time.Millisecond), store.minRatio)
				}
			})
		})
	}
}

// pushedBefore has a worker hold a lease of the fleet's set for took and
// give it back, as a push would.
func (f *payloadFleet) pushedBefore(t *testing.T, took time.Duration) {
	t.Helper()
	lim, err := limiter.New(f.db, limiter.WithTable("limits"))
	if err != nil {
		t.Fatal(err)
	}
	in := *f.inFlight
	in.Key = config.BucketKey("booking_com", "cred-1", "availability")
	lease, err := lim.AcquireLease(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(took)
	if err := lim.ReleaseLease(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
}

// flightTimes records when each request left and when its answer (or
// failure) came back.
type flightTimes struct {
	mu         sync.Mutex
	start, end []time.Time
}

func (f *flightTimes) around(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := next.RoundTrip(r)
		f.mu.Lock()
		f.start, f.end = append(f.start, start), append(f.end, time.Now())
		f.mu.Unlock()
		return resp, err
	})
}

// busy is the requests' time in flight over slots × the span from the
// first request to the last answer, and the span.
func (f *flightTimes) busy(slots int) (float64, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.start) == 0 {
		return 0, 0
	}
	first, last := f.start[0], f.end[0]
	var sum time.Duration
	for i := range f.start {
		sum += f.end[i].Sub(f.start[i])
		if f.start[i].Before(first) {
			first = f.start[i]
		}
		if f.end[i].After(last) {
			last = f.end[i]
		}
	}
	span := last.Sub(first)
	return float64(sum) / float64(time.Duration(slots)*span), span
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
