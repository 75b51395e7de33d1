package integration

import (
	"context"
	"fmt"
	"github.com/fleetbucket/fleetbucket/test/payloadjob"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// meterConfig is rates (normal) and availability (urgent) on one meter of
// 4/s with 4 of its burst of 8 kept for urgent pushes, pushed to url. The
// tests count the reserve's tokens exactly: no margin.
func meterConfig(t *testing.T, url string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`{"channels":{"bk":{"base_url":"` + url + `","allow_http":true,"endpoints":{
  "rates":        {"path":"/v1/ari","meter":"ari","limit":{"rate":4,"burst":8},"urgent_reserve":4,"margin":"0s"},
  "availability": {"path":"/v1/ari","meter":"ari","limit":{"rate":4,"burst":8},"urgent_reserve":4,"priority":"urgent","margin":"0s"}},
  "credentials":{"c1":{"token_env":"T"}}}},
  "properties":{"h1":[{"channel":"bk","credential":"c1","hotel_ref":"BK-1"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// recordingQueue keeps what the dispatcher deferred or dead-lettered.
type recordingQueue struct {
	mu       sync.Mutex
	deferred []job.Job
	dead     []string
}

func (q *recordingQueue) Defer(_ context.Context, j job.Job, _ time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deferred = append(q.deferred, j)
	return nil
}

func (q *recordingQueue) DeadLetter(_ context.Context, _, reason string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dead = append(q.dead, reason)
	return nil
}

// meterRig is the normal push path on a meter with an urgent reserve,
// from the connections file (syncer.Route) through the dispatcher and
// otapush to a mock vendor, on one fake clock shared by the limiter, the
// client's and the dispatcher's sleeps and the vendor.
type meterRig struct {
	clock          *limitertest.Clock
	lim            *limiter.Limiter
	ota            *mockota.Server
	d              payloadjob.Dispatcher
	normal, urgent dispatch.Route
}

func newMeterRig(t *testing.T, vendor limiter.Limit, attempts int) *meterRig {
	t.Helper()
	r := &meterRig{clock: newClock()}
	advance := r.clock.Sleep
	db := emulator.DynamoDB(t)
	var err error
	if r.lim, err = limiter.New(db, limiter.WithTable(emulator.NewTable(t, db)), limiter.WithClock(r.clock.Now), limiter.WithDenialCacheAge(0)); err != nil {
		t.Fatal(err)
	}
	if r.ota, err = mockota.Start(mockota.Config{Limit: vendor, Now: r.clock.Now}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.ota.Close)
	policy := otapush.DefaultPolicy
	policy.MaxAttempts = attempts
	client, err := otapush.New(nil, r.lim, policy, otapush.WithClock(r.clock.Now), otapush.WithSleep(advance),
		otapush.WithJitter(func(time.Duration) time.Duration { return time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	sy := &syncer.Syncer{Config: meterConfig(t, r.ota.URL()), Token: func(string) string { return "tok" }}
	r.d = payloadjob.Dispatcher{Dispatcher: &dispatch.Dispatcher{Limiter: r.lim, Pusher: client, Queue: &recordingQueue{}, Policy: dispatch.DefaultPolicy,
		Now: r.clock.Now, Sleep: advance, Jitter: func(max time.Duration) time.Duration { return max / 4 }}, Routes: sy}
	r.normal, r.urgent = r.route(t, "rates"), r.route(t, "availability")
	return r
}

func (r *meterRig) route(t *testing.T, kind string) dispatch.Route {
	t.Helper()
	route, err := r.d.Routes.Route(r.job(kind, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	return route
}

func (r *meterRig) job(kind, id string) job.Job {
	return job.Job{ID: id, Channel: "bk", Credential: "c1", Endpoint: kind, Payload: []byte(`{"property_id":"h1"}`), FirstSeen: r.clock.Now()}
}

// urgentFinds asks the meter for n tokens at once, as n urgent pushes
// would, and reports whether it granted them (they are spent).
func (r *meterRig) urgentFinds(t *testing.T, n int) bool {
	t.Helper()
	_, err := r.lim.Reserve(context.Background(), r.urgent.Bucket, n, 0)
	if _, denied := limiter.RetryAfter(err); denied {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// Issue 17, item 10: normal pushes on a meter with an urgent reserve book
// only their share (burst − reserve) and only tokens free now; their
// retries must too, or three retries of a push booked 3 tokens past the
// share and the urgent pushes found the reserve taken. And when the
// vendor says nothing is left (a 429, or a low remaining count), nothing
// is: a penalty or a drain from a normal push empties the whole meter,
// not only the normal share, which left the 4 urgent tokens free.
func TestNormalRetriesNeverTakeTheUrgentReserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("retries", func(t *testing.T) {
		r := newMeterRig(t, limiter.PerSecond(1000, 1000), 4)
		// Other workers' normal pushes have just taken the share.
		if _, err := r.lim.Reserve(ctx, r.normal.Bucket, r.normal.Bucket.Limit.Burst, 0); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			id := fmt.Sprintf("rates-%d", i)
			r.ota.FailNext(id, 503, 3)
			res, err := r.d.HandleJob(ctx, r.job("rates", id))
			if err != nil || res.Outcome != dispatch.Pushed || res.Attempts != 4 {
				t.Fatalf("normal push %d: %+v, %v; want pushed on its fourth attempt", i, res, err)
			}
			if !r.urgentFinds(t, 4) {
				t.Fatalf("after normal push %d and its 3 retries, 4 urgent pushes found no token at once: the retries took the reserve", i)
			}
		}
	})
	t.Run("penalty", func(t *testing.T) {
		r := newMeterRig(t, limiter.PerSecond(1000, 1000), 1)
		r.ota.FailNext("rates-429", 429, 1) // no Retry-After: the default, 2 s
		res, err := r.d.HandleJob(ctx, r.job("rates", "rates-429"))
		if err != nil || res.Outcome != dispatch.Deferred || res.Throttled != 1 {
			t.Fatalf("throttled normal push: %+v, %v; want deferred after one 429", res, err)
		}
		until := r.clock.Now().Add(otapush.DefaultPolicy.DefaultRetryAfter)
		for _, before := range []time.Duration{2 * time.Second, time.Second, 250 * time.Millisecond} {
			r.clock.Set(until.Add(-before))
			if r.urgentFinds(t, 1) {
				t.Fatalf("an urgent push found a token %v before the vendor's Retry-After ends", before)
			}
		}
	})
	t.Run("drain", func(t *testing.T) {
		// The vendor meters the credential tighter than the fleet knows
		// (someone else uses it): every answer says 0 requests remain.
		r := newMeterRig(t, limiter.PerSecond(4, 1), 1)
		res, err := r.d.HandleJob(ctx, r.job("rates", "rates-low"))
		if err != nil || res.Outcome != dispatch.Pushed {
			t.Fatalf("normal push: %+v, %v; want pushed", res, err)
		}
		if r.urgentFinds(t, 1) {
			t.Fatal("an urgent push found a token right after the vendor said 0 requests remain")
		}
	})
}
