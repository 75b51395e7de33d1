package integration

import (
	"context"
	"fmt"
	"github.com/fleetbucket/fleetbucket/test/payloadjob"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// Issue 27, item 1: a route with a calendar quota whose jobs come in a
// batch (HandleJobs) got their slots from the batch's one write
// (ReserveBatch: a deferred batch's due jobs, or lingering jobs on a
// fill_quota endpoint, bookLingering) and pushed on them with no quota
// taken: every job deferred to a reset came back within the minute after
// it and all of them pushed. 12 jobs on a quota of 5 a day, run together
// through the store, the real push client and a mock vendor that answers
// the first 2 requests it meters 503 (so that retries, which the vendor
// counts too, must take the quota as well). The vendor's own record says
// how many requests it metered in the day: exactly the quota, never more;
// every job is pushed or deferred to the next reset.
func TestBatchedQuotaJobsEachTakeTheQuota(t *testing.T) {
	t.Parallel()
	const count, jobs, failed = 5, 12, 2
	db := emulator.DynamoDB(t)
	reset := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		at   time.Time // the clock when the batch comes
		job  func(i int, now time.Time) job.Job
	}{
		{"a deferred batch back in the minute after the reset", reset.Add(20 * time.Second), func(i int, now time.Time) job.Job {
			// Deferred to the reset the evening before: due now.
			return job.Job{ID: fmt.Sprintf("job-%02d", i), Channel: "bk", Credential: "c1", Endpoint: "availability",
				FirstSeen: reset.Add(-3 * time.Hour), Deferrals: 1, Payload: []byte(`{}`)}
		}},
		{"lingering jobs on a fill_quota endpoint", reset.Add(9 * time.Hour), func(i int, now time.Time) job.Job {
			// Lingering for 5 s more: the bucket fills up first, so each
			// books an early slot (bookLingering).
			return job.Job{ID: fmt.Sprintf("lane-%02d@tok", i), Channel: "bk", Credential: "c1", Endpoint: "availability",
				FirstSeen: now, Linger: true, NotBefore: now.Add(5 * time.Second), Payload: []byte(`{}`)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock()
			clock.Set(tt.at)
			// Jobs sleep concurrently on the clock: it only moves forward.
			advance := clock.Sleep
			lim, err := limiter.New(db, limiter.WithTable(emulator.NewTable(t, db)), limiter.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			ota, err := mockota.Start(mockota.Config{Limit: limiter.PerSecond(1000, 1000), Enforce: mockota.EnforceNone, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ota.Close)
			metered := 0
			ota.FailMatching(http.StatusServiceUnavailable, func(mockota.Request) bool { metered++; return metered <= failed })
			client, err := otapush.New(nil, lim, otapush.DefaultPolicy, otapush.WithClock(clock.Now), otapush.WithSleep(advance),
				otapush.WithJitter(func(time.Duration) time.Duration { return time.Millisecond }))
			if err != nil {
				t.Fatal(err)
			}
			key := "bk#c1#availability"
			q, err := gcra.LoadQuota(count, "day", "UTC")
			if err != nil {
				t.Fatal(err)
			}
			route := dispatch.Route{Bucket: limiter.Bucket{Key: key, Limit: limiter.PerSecond(100, 100)}, URL: ota.URL() + "/v1/availability",
				Header: http.Header{"Authorization": {"Bearer c1"}}, Quota: &limiter.QuotaBucket{Key: key, Quota: q}, MaxAge: 7 * 24 * time.Hour}
			queue := &lockedQueue{q: quotaQueue{clock: clock}}
			d := payloadjob.Dispatcher{Dispatcher: &dispatch.Dispatcher{Limiter: lim, Pusher: client, Queue: queue, Policy: dispatch.DefaultPolicy,
				Now: clock.Now, Sleep: advance}, Routes: quotaRoute(route)}
			if err := d.Validate(); err != nil {
				t.Fatal(err)
			}
			batch := make([]job.Job, jobs)
			for i := range batch {
				batch[i] = tt.job(i, tt.at)
			}
			results, errs := d.HandleJobs(context.Background(), batch)

			day, next := reset, reset.Add(24*time.Hour)
			if tt.at.After(next) {
				day, next = next, next.Add(24*time.Hour)
			}
			inDay := 0
			for _, r := range ota.Requests() {
				if r.Metered && !r.At.Before(day) && r.At.Before(next) {
					inDay++
				}
			}
			if inDay != count {
				t.Errorf("the vendor metered %d requests on %s, want exactly the quota of %d (%d answered 503 and retried)",
					inDay, day.Format(time.DateOnly), count, failed)
			}
			pushed, deferred := 0, 0
			for i, res := range results {
				switch {
				case errs[i] != nil:
					t.Errorf("job %s: %v", batch[i].ID, errs[i])
				case res.Outcome == dispatch.Pushed:
					pushed++
				case res.Outcome == dispatch.Deferred:
					deferred++
				default:
					t.Errorf("job %s: %s (%s), want pushed or deferred", batch[i].ID, res.Outcome, res.Reason)
				}
			}
			if len(ota.Accepted()) != pushed || pushed < count-failed || pushed+deferred != jobs || len(queue.q.dead) != 0 {
				t.Errorf("%d pushed (the vendor accepted %d), %d deferred, dead letters %v; want %d to %d pushed, the rest deferred",
					pushed, len(ota.Accepted()), deferred, queue.q.dead, count-failed, count)
			}
			for _, due := range queue.q.due {
				if due.due.Before(next) && due.j.Failures == 0 {
					t.Errorf("job %s deferred to %v, before the quota's reset at %v", due.j.ID, due.due, next)
				}
			}
		})
	}
}

// lockedQueue is a quotaQueue for jobs handled concurrently.
type lockedQueue struct {
	mu sync.Mutex
	q  quotaQueue
}

func (l *lockedQueue) Defer(ctx context.Context, j job.Job, wait time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.q.Defer(ctx, j, wait)
}

func (l *lockedQueue) DeadLetter(ctx context.Context, body, reason string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.q.DeadLetter(ctx, body, reason)
}
