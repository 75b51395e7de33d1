package dispatch

import (
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A bulk job (a route that takes only tokens free at once) is denied
// because live pushes booked the bucket's next 300 ms, and its call's hold
// (100 ms, as a changes batch's) cannot sleep that: it is deferred. SQS
// delays come in whole seconds, so a deferral of 300 ms sent as one came
// back after a second, and the bucket's tokens from 300 ms on went unused
// by it (measured in the simulated onboarding: 6% of the quota live traffic
// left, lost in gaps of 2 to 11 intervals between bulk pushes). The job
// must come back by its token and push within 50 ms of it. So must a job
// whose token is more than a second away: it is deferred by whole seconds
// less about half a deferred call's hold (Policy.MaxHold), which it sleeps
// to its turn (askers.go); sent with its wait, rounded up to a whole
// second, it came back half an interval past its token. A wait a deferred
// call's hold could not sleep goes as it did: rounded up.
func TestBulkJobDeferredUnderASecondComesBackAtItsToken(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		name    string
		booked  int // tokens live pushes booked ahead at 10/s
		maxHold time.Duration
		want    time.Duration
	}{
		{"300 ms booked", 3, DefaultPolicy.MaxHold, 300 * ms},
		{"1.5 s booked", 15, DefaultPolicy.MaxHold, 1500 * ms},
		// A deferred call could not sleep the wait: sent back at once, the
		// job would go round the queue until its token, each trip a
		// deferral counted against max_deferrals.
		{"300 ms booked, a deferred call holds 200 ms", 3, 200 * ms, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				key := "ota#c#rates"
				route := Route{Bucket: limiter.Bucket{Key: key, Limit: limiter.Limit{Rate: 10, Burst: 1}}, URL: "http://ota.invalid",
					Header: http.Header{}, Horizon: ms, OneAsker: true}
				lim := limitertest.New()
				t0 := time.Now()
				if _, err := lim.Reserve(t.Context(), limiter.Bucket{Key: key, Limit: limiter.Limit{Rate: 10, Burst: 20}}, tt.booked, time.Minute); err != nil {
					t.Fatal(err)
				}
				vendor := &arrivals{at: map[string][]time.Time{}}
				q := &fakeQueue{}
				policy := DefaultPolicy
				policy.MaxHold = tt.maxHold
				d := &worker{&Dispatcher{Limiter: lim, Pusher: vendor, Queue: q, Policy: policy}, nil, fixedRoute(route)}
				j := job.Job{ID: "bulk", Channel: "ota", Credential: "c", Endpoint: "rates", FirstSeen: t0, Payload: []byte(`{}`)}
				res, errs := d.Run(t.Context(), d.tasks([]job.Job{j}), t0.Add(100*ms))
				if errs[0] != nil || res[0].Outcome != Deferred || len(q.deferred) != 1 {
					t.Fatalf("%+v, %v, %d deferrals; want deferred once", res[0], errs[0], len(q.deferred))
				}
				// The queue delivers it after its DelaySeconds (whole
				// seconds, rounded up) to a call that holds MaxHold.
				back := q.deferred[0]
				time.Sleep(time.Duration(math.Ceil(back.wait.Seconds())) * time.Second)
				res, errs = d.HandleJobs(t.Context(), []job.Job{back.j})
				if errs[0] != nil || res[0].Outcome != Pushed {
					t.Fatalf("back from the queue: %+v, %v; want pushed", res[0], errs[0])
				}
				at := vendor.at[key]
				if len(at) != 1 {
					t.Fatalf("%d pushes, want 1", len(at))
				}
				if got := at[0].Sub(t0); got < tt.want || got > tt.want+50*ms {
					t.Errorf("pushed %v after the bucket was booked %d tokens ahead at 10/s; want %v to %v (deferred %v with not_before %v)",
						got, tt.booked, tt.want, tt.want+50*ms, back.wait, back.j.NotBefore.Sub(t0))
				}
			})
		})
	}
}
