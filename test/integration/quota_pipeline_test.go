package integration

import (
	"context"
	"fmt"
	"github.com/fleetbucket/fleetbucket/test/payloadjob"
	"sort"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// quotaPusher records when (on the test's clock) each push went out.
type quotaPusher struct {
	clock *limitertest.Clock
	at    map[string]time.Time
}

func (p *quotaPusher) Push(_ context.Context, req otapush.Request) (otapush.Response, error) {
	if _, twice := p.at[req.JobID]; twice {
		return otapush.Response{}, fmt.Errorf("job %s pushed twice", req.JobID)
	}
	p.at[req.JobID] = p.clock.Now()
	return otapush.Response{Attempts: 1}, nil
}

// quotaQueue keeps deferred jobs with when they are due.
type quotaQueue struct {
	clock *limitertest.Clock
	due   []dueJob
	dead  []string
}

type dueJob struct {
	j   job.Job
	due time.Time
}

func (q *quotaQueue) Defer(_ context.Context, j job.Job, wait time.Duration) error {
	j.Deferrals++
	q.due = append(q.due, dueJob{j, q.clock.Now().Add(wait)})
	return nil
}

func (q *quotaQueue) DeadLetter(_ context.Context, _, reason string) error {
	q.dead = append(q.dead, reason)
	return nil
}

type quotaRoute dispatch.Route

func (r quotaRoute) Route(job.Job) (dispatch.Route, error) { return dispatch.Route(r), nil }

// A route with a daily quota of 5 in Los Angeles, through the dispatcher
// on the store, across the spring-forward night (2026-03-08 is 23 hours
// long there). 25 jobs on the evening before: 5 push, 20 are deferred to
// the local midnight, each at its own offset in the minute after it. They
// come back as they are due: 5 push on the short day, 15 are deferred to
// its local midnight, 23 hours after its start, and so on. Never more
// than 5 pushes in a local day; every job pushes once.
func TestPipelineQuotaAcrossADSTDay(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	w := newWorker(t, table, limiter.WithClock(clock.Now))
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	const count = 5
	q, err := gcra.LoadQuota(count, "day", "America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	key := "expedia#c1#availability"
	route := dispatch.Route{Bucket: limiter.Bucket{Key: key, Limit: limiter.PerSecond(100, 100)}, URL: "http://ota.invalid",
		Quota: &limiter.QuotaBucket{Key: key, Quota: q}, MaxAge: 7 * 24 * time.Hour}
	pusher := &quotaPusher{clock: clock, at: map[string]time.Time{}}
	queue := &quotaQueue{clock: clock}
	d := payloadjob.Dispatcher{Dispatcher: &dispatch.Dispatcher{Limiter: w.Limiter, Pusher: pusher, Queue: queue, Policy: dispatch.DefaultPolicy,
		Now: clock.Now, Sleep: clock.Sleep}, Routes: quotaRoute(route)}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	handle := func(j job.Job) dispatch.Result {
		t.Helper()
		res, err := d.HandleJob(context.Background(), j)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	evening := time.Date(2026, 3, 7, 20, 0, 0, 0, la)
	clock.Set(evening)
	for i := range 25 {
		handle(job.Job{ID: fmt.Sprintf("job-%02d", i), Channel: "expedia", Credential: "c1", Endpoint: "availability",
			FirstSeen: evening, Payload: []byte(`{}`)})
		clock.Advance(time.Second)
	}
	if len(pusher.at) != count || len(queue.due) != 25-count {
		t.Fatalf("on the first evening %d pushed and %d deferred, want %d and %d", len(pusher.at), len(queue.due), count, 25-count)
	}
	checkSpread(t, queue.due, time.Date(2026, 3, 8, 0, 0, 0, 0, la))

	// Deliver each deferred job when it is due, until none is left; the
	// resets met on the way are each day's local midnight.
	resets := map[time.Time]int{}
	for len(queue.due) > 0 {
		sort.Slice(queue.due, func(i, j int) bool { return queue.due[i].due.Before(queue.due[j].due) })
		next := queue.due[0]
		queue.due = queue.due[1:]
		clock.Set(next.due)
		before := len(queue.due)
		res := handle(next.j)
		if res.Outcome == dispatch.Deferred && len(queue.due) == before+1 {
			back := queue.due[len(queue.due)-1].due
			local := back.In(la)
			resets[time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, la)]++
		} else if res.Outcome != dispatch.Pushed {
			t.Fatalf("job %s: %+v", next.j.ID, res)
		}
	}
	if len(queue.dead) != 0 || len(pusher.at) != 25 {
		t.Fatalf("%d pushed, dead letters %v; want all 25 pushed", len(pusher.at), queue.dead)
	}
	perDay := map[string]int{}
	for _, at := range pusher.at {
		perDay[at.In(la).Format("2006-01-02")]++
	}
	for day, n := range perDay {
		if n > count {
			t.Errorf("%d pushes on %s (Los Angeles), quota %d", n, day, count)
		}
	}
	if perDay["2026-03-08"] != count || perDay["2026-03-09"] != count {
		t.Errorf("pushes per local day %v, want %d on the 8th (23 hours) and on the 9th", perDay, count)
	}
	// The short day's reset, 23 hours after its start.
	short := time.Date(2026, 3, 9, 0, 0, 0, 0, la)
	if got := short.Sub(time.Date(2026, 3, 8, 0, 0, 0, 0, la)); got != 23*time.Hour || resets[short] != 25-2*count {
		t.Errorf("the 8th lasted %v and %d jobs were deferred to its end (resets %v); want 23h and %d", got, resets[short], resets, 25-2*count)
	}
}

// checkSpread checks that jobs denied by a spent quota come back in the
// minute after its reset, each at its own moment, not all at once.
func checkSpread(t *testing.T, due []dueJob, reset time.Time) {
	t.Helper()
	seen := map[time.Time]bool{}
	first, last := due[0].due, due[0].due
	for _, d := range due {
		if d.due.Before(reset) || !d.due.Before(reset.Add(gcra.SpreadWindow)) {
			t.Errorf("job %s comes back at %v, want in the minute after the reset %v", d.j.ID, d.due, reset)
		}
		seen[d.due] = true
		first = minTime(first, d.due)
		if d.due.After(last) {
			last = d.due
		}
	}
	if len(seen) < len(due)*3/4 || last.Sub(first) < gcra.SpreadWindow/2 {
		t.Errorf("%d jobs come back at %d distinct moments over %v, want them spread over the minute", len(due), len(seen), last.Sub(first))
	}
}
