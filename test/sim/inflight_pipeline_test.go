package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/payloadjob"
)

// The whole push path (a changes and a deferred queue, each worked by 8
// instances with their own dispatcher, limiter and LeaseGate, the
// limiter's table) against a vendor that works on at most 2 requests of a
// credential and endpoint at once and counts them itself (mockota's
// MaxConcurrent): with max_in_flight 2 it never sees a 3rd, refuses
// nothing for concurrency, and every job lands once.
//
// The vendor holds its first requests until 2 run at once (mockota's
// Gather), for at most 2 s, and answers each after 200 ms: a fleet whose
// leases allow 2 reaches 2 at once whatever the store's latency, one whose
// leases allow 1 keeps each request 2 s and never does. The store answers
// at moto's latencies and at DynamoDB's: a lease's acquire and release are
// writes, and the slower they are the fewer pushes overlap.
func TestPipelineMaxInFlightAgainstAConcurrencyVendor(t *testing.T) {
	lim := limiter.PerSecond(50, 50)
	for _, store := range []struct {
		name string
		lat  Latency
	}{
		{"moto", Latency{P50: 52 * time.Millisecond, P99: 170 * time.Millisecond}},
		{"DynamoDB", Latency{P50: 5 * time.Millisecond, P99: 25 * time.Millisecond}},
	} {
		t.Run(store.name, func(t *testing.T) {
			ota := startOTA(t, mockota.Config{Limit: lim, MaxConcurrent: 2, Latency: 200 * time.Millisecond, Gather: 2, GatherWait: 2 * time.Second})
			synctest.Test(t, func(t *testing.T) {
				f := newPayloadFleet(t, ota, lim, store.lat)
				f.inFlight = &limiter.InFlight{Max: 2, Hold: 10 * time.Second, Timeout: 5 * time.Second}
				jobs := payloadJobs(40, "availability")
				f.run(8, jobs, 4*time.Minute)
				f.assertExactlyOnce(jobs)
				if peak := ota.PeakConcurrent("cred-1", "availability"); peak > 2 {
					t.Errorf("the vendor had %d requests in flight at once, max_in_flight is 2", peak)
				} else if peak < 2 {
					t.Errorf("the vendor never had 2 requests in flight (peak %d): the leases serialize more than they must", peak)
				}
				if n := ota.Count429(); n != 0 {
					t.Errorf("%d 429s, want none", n)
				}
				t.Logf("40 jobs, 8 instances a queue, max_in_flight 2: last accepted at +%v, %d requests, %d store calls",
					f.lastAccepted().Round(time.Millisecond), len(ota.Requests()), f.storeCalls())
			})
		})
	}
}

// payloadFleet is test/integration's push pipeline in simulated time: push
// jobs on a changes queue, a deferred and a dead-letter queue (SQS), the
// limiter's table (DB), and the mock OTA reached in memory (handlerTransport),
// worked by a fleet of dispatchers that share nothing but those. It runs
// inside a synctest bubble; the mock OTA is started outside it (its
// listener is a real socket) and only its handler is called inside.
type payloadFleet struct {
	t        *testing.T
	ota      *mockota.Server
	limit    limiter.Limit
	inFlight *limiter.InFlight // the routes' (its Key is replaced by the bucket's)
	db       *DB
	sqs      *SQS
	changes  *Queue
	deferred *Queue
	http     *http.Client
	start    time.Time

	mu      sync.Mutex
	results map[string][]dispatch.Result
}

func newPayloadFleet(t *testing.T, ota *mockota.Server, lim limiter.Limit, storeLatency Latency) *payloadFleet {
	t.Helper()
	db := NewDB(rand.New(rand.NewPCG(testSeed(t), 1)), storeLatency)
	db.checkItems = true
	if err := limiter.CreateTable(context.Background(), db, "limits"); err != nil {
		t.Fatal(err)
	}
	q := NewSQS(rand.New(rand.NewPCG(testSeed(t), 2)), Latency{P50: 8 * time.Millisecond, P99: 40 * time.Millisecond}, 0, 1000)
	f := &payloadFleet{t: t, ota: ota, limit: lim, db: db, sqs: q, changes: q.Create("changes", time.Minute), deferred: q.Create(deferredURL, time.Minute),
		http: &http.Client{Transport: handlerTransport{h: ota}}, start: time.Now(), results: map[string][]dispatch.Result{}}
	q.Create(deadURL, time.Minute)
	return f
}

// Route is the fleet's channel config: booking_com, any endpoint, one
// limit.
func (f *payloadFleet) Route(j job.Job) (dispatch.Route, error) {
	if j.Channel != "booking_com" {
		return dispatch.Route{}, fmt.Errorf("unknown channel %q", j.Channel)
	}
	r := dispatch.Route{
		Bucket: limiter.Bucket{Key: config.BucketKey(j.Channel, j.Credential, j.Endpoint), Limit: f.limit},
		URL:    "http://ota.sim/v1/" + j.Endpoint,
		Header: http.Header{"Authorization": {"Bearer " + j.Credential}},
	}
	if f.inFlight != nil {
		in := *f.inFlight
		in.Key = r.Bucket.Key
		r.InFlight = &in
	}
	return r, nil
}

// instance is one worker's stack, as one Lambda execution environment
// builds it: its own limiter (and circuit breaker), push client and lease
// gate over the shared table.
func (f *payloadFleet) instance() payloadjob.Dispatcher {
	f.t.Helper()
	lim, err := limiter.New(f.db, limiter.WithTable("limits"), limiter.WithCircuitBreaker(3, 5*time.Second))
	if err != nil {
		f.t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	push, err := otapush.New(f.http, lim, otapush.DefaultPolicy, otapush.WithLogger(quiet))
	if err != nil {
		f.t.Fatal(err)
	}
	d := payloadjob.Dispatcher{Dispatcher: &dispatch.Dispatcher{Limiter: lim, Pusher: push, Policy: dispatch.DefaultPolicy, Now: time.Now, Log: quiet,
		Fence: lim.FirstAfter, Leases: dispatch.NewLeases(limiter.NewLeaseGate(lim)),
		Queue: &queue.Queue{SQS: f.sqs, DeferredURL: deferredURL, DeadURL: deadURL, Now: time.Now}}, Routes: f}
	if err := d.Validate(); err != nil {
		f.t.Fatal(err)
	}
	return d
}

// payloadJobs are n push jobs of booking_com's cred-1 to endpoint.
func payloadJobs(n int, endpoint string) []job.Job {
	jobs := make([]job.Job, n)
	for i := range jobs {
		jobs[i] = job.Job{ID: fmt.Sprintf("job-%04d", i), Channel: "booking_com", Credential: "cred-1", Endpoint: endpoint,
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), FirstSeen: time.Now()}
	}
	return jobs
}

// run puts jobs on the changes queue and works both queues with n
// instances each until every job is accepted and both queues are empty,
// or limit has passed (a failure).
func (f *payloadFleet) run(n int, jobs []job.Job, limit time.Duration) {
	f.t.Helper()
	for _, j := range jobs {
		body, err := job.Encode(j)
		if err != nil {
			f.t.Fatal(err)
		}
		f.sqs.Put(f.changes, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, q := range []*Queue{f.changes, f.deferred} {
		pool := make(chan payloadjob.Dispatcher, n)
		for range n {
			pool <- f.instance()
		}
		wg.Go(func() { f.poll(ctx, q, pool) })
	}
	deadline := time.Now().Add(limit)
	for !f.done(len(jobs)) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !f.done(len(jobs)) {
		f.t.Errorf("the fleet did not finish within %v: %d of %d jobs accepted, %d and %d messages queued", limit,
			len(f.ota.AcceptedByJob()), len(jobs), f.sqs.Pending(f.changes), f.sqs.Pending(f.deferred))
	}
	cancel()
	wg.Wait()
}

func (f *payloadFleet) done(jobs int) bool {
	return len(f.ota.AcceptedByJob()) >= jobs && f.sqs.Pending(f.changes) == 0 && f.sqs.Pending(f.deferred) == 0
}

// poll is q's event source mapping: it receives batches of up to 10 and
// hands each to a free instance of pool, as Lambda invokes one
// environment per batch, at most len(pool) at once.
func (f *payloadFleet) poll(ctx context.Context, q *Queue, pool chan payloadjob.Dispatcher) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		var d payloadjob.Dispatcher
		select {
		case d = <-pool:
		case <-ctx.Done():
			return
		}
		msgs := f.sqs.Receive(q, 10)
		if len(msgs) == 0 {
			pool <- d
			wait := 200 * time.Millisecond // a long poll returns as soon as a message is visible
			if next := f.sqs.NextVisible(q); !next.IsZero() {
				wait = min(wait, max(time.Until(next), time.Millisecond))
			} else if f.sqs.Arrival(ctx, q) != nil {
				return
			}
			if sleep(ctx, wait) != nil {
				return
			}
			continue
		}
		wg.Go(func() {
			defer func() { pool <- d }()
			f.invoke(ctx, q, d, msgs)
		})
	}
}

// invoke is one invocation: the batch's jobs dispatched together, the
// handled messages deleted, the failed ones left to come back.
func (f *payloadFleet) invoke(ctx context.Context, q *Queue, d payloadjob.Dispatcher, msgs []*Message) {
	jobs := make([]job.Job, len(msgs))
	for i, m := range msgs {
		j, err := job.Decode(m.Body)
		if err != nil {
			f.t.Errorf("message %s: %v", m.ID, err)
			return
		}
		jobs[i] = j
	}
	results, errs := d.HandleJobs(ctx, jobs)
	var handled []*Message
	f.mu.Lock()
	for i, res := range results {
		if errs[i] != nil {
			continue
		}
		handled = append(handled, msgs[i])
		f.results[jobs[i].ID] = append(f.results[jobs[i].ID], res)
	}
	f.mu.Unlock()
	f.sqs.Delete(q, handled)
}

// assertExactlyOnce checks that the vendor accepted every job once, and
// nothing else.
func (f *payloadFleet) assertExactlyOnce(jobs []job.Job) {
	f.t.Helper()
	byJob := f.ota.AcceptedByJob()
	for _, j := range jobs {
		if byJob[j.ID] != 1 {
			f.t.Errorf("job %s accepted %d times, want exactly once: %s", j.ID, byJob[j.ID], f.history(j.ID))
		}
	}
	if len(byJob) != len(jobs) {
		f.t.Errorf("vendor accepted %d distinct jobs, want %d", len(byJob), len(jobs))
	}
	if dead := f.sqs.DeadLetters(); len(dead) != 0 {
		f.t.Errorf("%d messages dead-lettered, want none; first: %s", len(dead), reasonOf(dead[0]))
	}
}

// history is what the fleet and the vendor saw of one job, for a failure.
func (f *payloadFleet) history(id string) string {
	var b strings.Builder
	f.mu.Lock()
	for _, r := range f.results[id] {
		fmt.Fprintf(&b, "\n  %s slot +%v attempts %d throttled %d wasted %d: %q", r.Outcome, r.Slot.Sub(f.start), r.Attempts, r.Throttled, r.WastedSlots, r.Reason)
	}
	f.mu.Unlock()
	for _, r := range f.ota.Requests() {
		if r.JobID == id {
			fmt.Fprintf(&b, "\n  vendor answered %d at +%v", r.Status, r.At.Sub(f.start))
		}
	}
	return b.String()
}

// storeCalls counts the calls the fleet made on the store.
func (f *payloadFleet) storeCalls() int {
	n := 0
	for _, c := range f.db.Stats().Calls {
		n += c
	}
	return n
}

// lastAccepted is when, from the run's start, the vendor accepted its last
// request.
func (f *payloadFleet) lastAccepted() time.Duration {
	acc := f.ota.Accepted()
	if len(acc) == 0 {
		return 0
	}
	return acc[len(acc)-1].At.Sub(f.start)
}

// handlerTransport reaches an http.Handler in memory: no socket, so the
// bubble's clock stays in charge. A handler that aborts (the client gave
// up while it waited: http.ErrAbortHandler) answers nothing. answered, if
// set, sees every answer as the client gets it.
type handlerTransport struct {
	h        http.Handler
	answered func(*http.Response)
}

func (t handlerTransport) RoundTrip(r *http.Request) (resp *http.Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			resp, err = nil, context.Cause(r.Context())
			if err == nil {
				err = errors.New("handler aborted")
			}
		}
	}()
	if r.Body != nil {
		defer r.Body.Close()
	}
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	resp = w.Result()
	resp.Request = r
	if t.answered != nil {
		t.answered(resp)
	}
	return resp, nil
}
