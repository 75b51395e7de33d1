package bench

import (
	"context"
	"errors"
	"fmt"
	"github.com/fleetbucket/fleetbucket/test/payloadjob"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/poller"
)

// The overload scenario: 60 push jobs enqueued at once on a bucket of rate
// 6/s (burst 6), ten seconds of quota arriving in an instant, worked by 4
// workers through the SQS deferred queue on moto.
const (
	overloadJobs    = 60
	overloadWorkers = 4
	overloadTimeout = 90 * time.Second
)

var overloadLimit = limiter.PerSecond(6, 6)

// BenchmarkOverloadDeferral compares two ways of turning "no token yet"
// into a delayed SQS message:
//
//   - reserve-defer: fleetbucket's dispatcher (sdk/pipeline/dispatch with
//     sdk/pipeline/queue, wired as test/integration/pipeline_test.go wires it):
//     reserve a slot, and if it is more than a second away defer the job
//     carrying the slot, so it comes back owning its token;
//   - take-or-defer: Take, and on a denial defer the job with DelaySeconds =
//     ceil(RetryAfter); Take again when it comes back.
//
// It reports re-deferrals per job (deferrals of a job beyond its first),
// deferrals per job, SQS messages and DynamoDB requests per push, 429s,
// the drain time ÷ the ideal (jobs − burst) ÷ rate, and the fullest window
// of accepted pushes ÷ burst + rate·W by the mock's independent check.
func BenchmarkOverloadDeferral(b *testing.B) {
	for _, mode := range []string{"reserve-defer", "take-or-defer"} {
		b.Run(mode, func(b *testing.B) { overload(b, mode) })
	}
}

type overloadRun struct {
	b                               *testing.B
	sqs                             *sqs.Client
	changesURL, deferredURL, dlqURL string
	table                           string
	ota                             *mockota.Server
	meter                           *benchkit.Meter
	sends                           atomic.Int64 // SQS messages sent: jobs enqueued plus deferrals

	mu       sync.Mutex
	outcomes map[string][]dispatch.Outcome
}

func overload(b *testing.B, mode string) {
	r := &overloadRun{b: b, sqs: emulator.SQS(b), table: emulator.NewTable(b, emulator.DynamoDB(b)),
		meter: &benchkit.Meter{}, outcomes: map[string][]dispatch.Outcome{}}
	r.changesURL, r.deferredURL, r.dlqURL = r.queue("changes"), r.queue("deferred"), r.queue("dlq")
	ota, err := mockota.Start(mockota.Config{Limit: overloadLimit})
	if err != nil {
		b.Fatal(err)
	}
	defer ota.Close()
	r.ota = ota

	pool := make(chan handleFunc, overloadWorkers)
	for range overloadWorkers {
		pool <- r.worker(mode)
	}
	jobs := make([]job.Job, overloadJobs)
	now := time.Now()
	for i := range jobs {
		jobs[i] = job.Job{ID: fmt.Sprintf("job-%04d", i), Channel: "booking_com", Credential: "cred-1", Endpoint: "availability",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), FirstSeen: now}
	}
	r.enqueue(jobs)

	ctx, cancel := context.WithTimeout(context.Background(), overloadTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, url := range []string{r.changesURL, r.deferredURL} {
		pl := &poller.Poller{SQS: r.sqs, QueueURL: url, Visibility: 60 * time.Second, Concurrency: overloadWorkers,
			ShortPoll: 20 * time.Millisecond, Handler: r.handler(pool), OnError: func(err error) { b.Logf("poller: %v", err) }}
		wg.Go(func() { pl.Run(ctx) })
	}
	for ctx.Err() == nil && len(ota.AcceptedByJob()) < len(jobs) {
		time.Sleep(50 * time.Millisecond)
	}
	if ctx.Err() != nil {
		b.Errorf("%s: %d of %d jobs accepted within %v", mode, len(ota.AcceptedByJob()), len(jobs), overloadTimeout)
	}
	cancel()
	wg.Wait()
	r.report(len(jobs))
}

type handleFunc func(ctx context.Context, body string) (string, dispatch.Outcome, error)

// worker builds one worker's stack, as one Lambda instance would: its own
// DynamoDB client and limiter, the OTA push client, the deferral queue.
func (r *overloadRun) worker(mode string) handleFunc {
	cfg := emulator.Config(r.b)
	lim, err := limiter.New(dynamodb.NewFromConfig(cfg, r.meter.Option(), benchkit.ForEmulator), limiter.WithTable(r.table), limiter.WithCircuitBreaker(3, 5*time.Second))
	if err != nil {
		r.b.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	push, err := otapush.New(nil, lim, otapush.DefaultPolicy, otapush.WithLogger(quiet))
	if err != nil {
		r.b.Fatal(err)
	}
	q := &queue.Queue{SQS: countingSQS{sqs.NewFromConfig(cfg), &r.sends}, DeferredURL: r.deferredURL, DeadURL: r.dlqURL}
	if mode == "take-or-defer" {
		return takeOrDefer{routes: r, lim: lim, push: push, queue: q}.handle
	}
	d := payloadjob.Dispatcher{Dispatcher: &dispatch.Dispatcher{Limiter: lim, Pusher: push, Queue: q, Policy: dispatch.DefaultPolicy, Log: quiet}, Routes: r}
	if err := d.Validate(); err != nil {
		r.b.Fatal(err)
	}
	return func(ctx context.Context, body string) (string, dispatch.Outcome, error) {
		res, err := d.Handle(ctx, body)
		return res.JobID, res.Outcome, err
	}
}

// Route is the benchmark's channel config: one channel, one endpoint.
func (r *overloadRun) Route(j job.Job) (dispatch.Route, error) {
	if j.Channel != "booking_com" || j.Endpoint != "availability" {
		return dispatch.Route{}, fmt.Errorf("no route for %s/%s", j.Channel, j.Endpoint)
	}
	return dispatch.Route{
		Bucket: limiter.Bucket{Key: config.BucketKey(j.Channel, j.Credential, j.Endpoint), Limit: overloadLimit},
		URL:    r.ota.URL() + "/v1/" + j.Endpoint,
		Header: http.Header{"Authorization": {"Bearer " + j.Credential}},
	}, nil
}

// takeOrDefer is the common alternative to reservations: take a token now
// or put the job back on the queue for the wait the denial named, and take
// again when it returns.
type takeOrDefer struct {
	routes payloadjob.Router
	lim    *limiter.Limiter
	push   *otapush.Client
	queue  *queue.Queue
}

func (t takeOrDefer) handle(ctx context.Context, body string) (string, dispatch.Outcome, error) {
	j, err := job.Decode(body)
	if err != nil {
		return "", "", err
	}
	route, err := t.routes.Route(j)
	if err != nil {
		return j.ID, "", err
	}
	_, err = t.lim.Take(ctx, route.Bucket, 1)
	if wait, denied := limiter.RetryAfter(err); denied {
		// queue.Delay rounds up: DelaySeconds = ceil(RetryAfter).
		return j.ID, dispatch.Deferred, t.queue.Defer(ctx, j, wait)
	}
	if err != nil { // store trouble: fail closed, come back later
		return j.ID, dispatch.Deferred, t.queue.Defer(ctx, j, dispatch.DefaultPolicy.StoreCooldown)
	}
	_, err = t.push.Push(ctx, otapush.Request{Bucket: route.Bucket, URL: route.URL, Header: route.Header,
		JobID: j.ID, Body: j.Payload, Reserved: true})
	var later *otapush.DeferError
	if errors.As(err, &later) {
		return j.ID, dispatch.Deferred, t.queue.Defer(ctx, j, max(later.After, time.Second))
	}
	if err != nil {
		return j.ID, "", err
	}
	return j.ID, dispatch.Pushed, nil
}

// handler is what the sync Lambda does with a batch: each job concurrently;
// the ones whose handling failed stay on the queue.
func (r *overloadRun) handler(pool chan handleFunc) poller.Handler {
	return func(ctx context.Context, msgs []sqstypes.Message) ([]string, error) {
		h := <-pool
		defer func() { pool <- h }()
		var (
			mu     sync.Mutex
			failed []string
			wg     sync.WaitGroup
		)
		for _, m := range msgs {
			wg.Go(func() {
				id, outcome, err := h(ctx, aws.ToString(m.Body))
				if err != nil {
					mu.Lock()
					failed = append(failed, aws.ToString(m.MessageId))
					mu.Unlock()
					return
				}
				r.mu.Lock()
				r.outcomes[id] = append(r.outcomes[id], outcome)
				r.mu.Unlock()
			})
		}
		wg.Wait()
		return failed, nil
	}
}

func (r *overloadRun) report(jobs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	deferrals, reDeferrals, most := 0, 0, 0
	for _, outs := range r.outcomes {
		n := 0
		for _, o := range outs {
			if o == dispatch.Deferred {
				n++
			}
		}
		deferrals += n
		reDeferrals += max(n-1, 0)
		most = max(most, n)
	}
	accepted := r.ota.Accepted()
	times := make([]time.Time, len(accepted))
	for i, a := range accepted {
		times[i] = a.At
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	drain, ideal := 0.0, float64(jobs-overloadLimit.Burst)/overloadLimit.Rate
	if len(times) > 1 {
		drain = times[len(times)-1].Sub(times[0]).Seconds()
	}
	pushes := float64(max(len(accepted), 1))
	u := r.meter.Usage()
	b := r.b
	b.ReportMetric(float64(reDeferrals)/float64(jobs), "re-deferrals/job")
	b.ReportMetric(float64(deferrals)/float64(jobs), "deferrals/job")
	b.ReportMetric(float64(most), "max-deferrals")
	b.ReportMetric(float64(r.sends.Load())/pushes, "sqs-sends/push")
	b.ReportMetric(float64(u.Requests)/pushes, "req/push")
	b.ReportMetric(u.WCU/pushes, "WCU/push")
	b.ReportMetric(float64(r.ota.Count429()), "429s")
	b.ReportMetric(drain/ideal, "drain/ideal")
	b.ReportMetric(float64(len(accepted)), "pushes")
	// The vendor-side invariant, by the mock's own sliding-window check
	// (package window, no sdk/gcra).
	full, broken := r.ota.FullestWindow("cred-1", "availability")
	b.ReportMetric(full.Ratio(), "vendor-fullest-window")
	if broken {
		b.Errorf("the vendor accepted more than burst + rate·W: %v", full)
	}
	b.ReportMetric(0, "ns/op")
}

func (r *overloadRun) queue(name string) string {
	return emulator.NewQueue(r.b, r.sqs, "bench-"+name)
}

// enqueue puts jobs on the changes queue, ten to a batch.
func (r *overloadRun) enqueue(jobs []job.Job) {
	for start := 0; start < len(jobs); start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i, j := range jobs[start:min(start+10, len(jobs))] {
			body, err := job.Encode(j)
			if err != nil {
				r.b.Fatal(err)
			}
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: &body})
		}
		out, err := r.sqs.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &r.changesURL, Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			r.b.Fatalf("enqueue: %v %v", err, out)
		}
		r.sends.Add(int64(len(entries)))
	}
}

// countingSQS counts the messages the workers send.
type countingSQS struct {
	*sqs.Client
	n *atomic.Int64
}

func (c countingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.n.Add(1)
	return c.Client.SendMessage(ctx, in, o...)
}
