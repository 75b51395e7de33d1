package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/payloadjob"
	"github.com/fleetbucket/fleetbucket/test/poller"
)

// pipeline is the push path on the local stack: a changes queue of push
// jobs, a deferred queue, a dead-letter queue, the limiter table and a mock
// OTA, worked by a fleet of dispatchers that share nothing but those.
type pipeline struct {
	t                               *testing.T
	sqs                             *sqs.Client
	changesURL, deferredURL, dlqURL string
	table                           string
	ota                             *mockota.Server
	limit                           limiter.Limit
	adaptive                        *limiter.Adaptive // the buckets', if they adapt
	endpoints                       map[string]bool
	shards                          int // the routes' shards (0: a plain bucket)

	sends atomic.Int64 // SQS messages sent: jobs enqueued plus deferrals
	// lastCounter counts the DynamoDB calls of the last dispatcher built.
	lastCounter *dynamotest.Counter

	mu      sync.Mutex
	results map[string][]dispatch.Result
	// arrivals are the deferred jobs the workers took up, as the test saw
	// them (not as the dispatcher reports them), for a failure's message.
	arrivals map[string][]arrival
}

// arrival is a deferred job taken up by a worker: when, and the slot it
// held, if any.
type arrival struct {
	at, due, slot time.Time
}

func newPipeline(t *testing.T, limit limiter.Limit, ota mockota.Config) *pipeline {
	t.Helper()
	p := &pipeline{t: t, sqs: emulator.SQS(t), table: emulator.NewTable(t, emulator.DynamoDB(t)), limit: limit,
		endpoints: map[string]bool{"availability": true, "rates": true}, results: map[string][]dispatch.Result{},
		arrivals: map[string][]arrival{}}
	p.changesURL = p.queue("changes")
	p.deferredURL = p.queue("deferred")
	p.dlqURL = p.queue("dlq")
	srv, err := mockota.Start(ota)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	p.ota = srv
	return p
}

func (p *pipeline) queue(name string) string {
	p.t.Helper()
	return emulator.NewQueue(p.t, p.sqs, name)
}

// Route is the test's channel config: one channel, two endpoints.
func (p *pipeline) Route(j job.Job) (dispatch.Route, error) {
	if j.Channel != "booking_com" {
		return dispatch.Route{}, fmt.Errorf("unknown channel %q", j.Channel)
	}
	if !p.endpoints[j.Endpoint] {
		return dispatch.Route{}, fmt.Errorf("channel %q has no endpoint %q", j.Channel, j.Endpoint)
	}
	r := dispatch.Route{
		Bucket: limiter.Bucket{Key: config.BucketKey(j.Channel, j.Credential, j.Endpoint), Limit: p.limit, Adaptive: p.adaptive},
		URL:    p.ota.URL() + "/v1/" + j.Endpoint,
		Header: http.Header{"Authorization": {"Bearer " + j.Credential}},
	}
	if p.shards > 0 {
		r.Sharded = &limiter.ShardedBucket{Key: r.Bucket.Key, Limit: p.limit, Shards: p.shards}
	}
	return r, nil
}

// countingSQS counts the messages the dispatchers send.
type countingSQS struct {
	*sqs.Client
	n *atomic.Int64
}

func (c countingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.n.Add(1)
	return c.Client.SendMessage(ctx, in, o...)
}

type workerOpts struct {
	db     limiter.DynamoDBAPI // default: a fresh emulator client
	sqs    queue.SQSAPI        // default: a counting emulator client
	now    func() time.Time
	policy dispatch.Policy
}

// dispatcher builds one worker's stack, as one Lambda instance would.
func (p *pipeline) dispatcher(o workerOpts) *dispatch.Dispatcher {
	p.t.Helper()
	if o.db == nil {
		o.db = emulator.DynamoDB(p.t)
	}
	p.lastCounter = &dynamotest.Counter{DB: o.db}
	o.db = p.lastCounter
	if o.sqs == nil {
		o.sqs = countingSQS{emulator.SQS(p.t), &p.sends}
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.policy == (dispatch.Policy{}) {
		o.policy = dispatch.DefaultPolicy
		// moto delivers a delayed message late by about 6% of its delay
		// (a 20 s deferral comes back 1.2 s late; SQS itself is punctual),
		// so jobs come back 2 s before their slot rather than 1 s.
		o.policy.BlockThreshold = 2 * time.Second
	}
	lim, err := limiter.New(o.db, limiter.WithTable(p.table), limiter.WithClock(o.now), limiter.WithCircuitBreaker(3, 5*time.Second))
	if err != nil {
		p.t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	push, err := otapush.New(nil, lim, otapush.DefaultPolicy, otapush.WithClock(o.now), otapush.WithLogger(quiet))
	if err != nil {
		p.t.Fatal(err)
	}
	d := &dispatch.Dispatcher{
		Limiter: lim, Pusher: push, Policy: o.policy, Now: o.now, Log: quiet, Fence: lim.FirstAfter,
		Leases: dispatch.NewLeases(limiter.NewLeaseGate(lim)),
		Queue:  &queue.Queue{SQS: o.sqs, DeferredURL: p.deferredURL, DeadURL: p.dlqURL, Now: o.now},
	}
	if err := d.Validate(); err != nil {
		p.t.Fatal(err)
	}
	return d
}

// payload is one worker's stack for payload jobs, routed by p's syncer.
func (p *pipeline) payload(o workerOpts) payloadjob.Dispatcher {
	return payloadjob.Dispatcher{Dispatcher: p.dispatcher(o), Routes: p}
}

// patientPolicy is the dispatcher's policy for the tests that pace a
// fleet in real time and count its deferrals. Deferred jobs come back 5 s
// before their slots rather than 2 s, which covers the 2.5–3.6 s lateness
// of moto's SQS and a saturated worker pool on a loaded 2-core machine,
// and may sleep up to 10 s for a slot: the longest lead that the lateness
// the dispatcher learns can ask for (half the wait) on the ≤ 20 s waits of
// those tests. Otherwise a job that comes back as early as it asked to is
// deferred a second time, by design.
func patientPolicy() dispatch.Policy {
	p := dispatch.DefaultPolicy
	p.BlockThreshold, p.MaxHold = 5*time.Second, 10*time.Second
	return p
}

func pushJob(i int, endpoint string, firstSeen time.Time) job.Job {
	return job.Job{ID: fmt.Sprintf("job-%04d", i), Channel: "booking_com", Credential: "cred-1", Endpoint: endpoint,
		Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), FirstSeen: firstSeen}
}

// enqueue puts jobs on the changes queue, ten to a batch.
func (p *pipeline) enqueue(jobs []job.Job) {
	p.t.Helper()
	for start := 0; start < len(jobs); start += 10 {
		if err := p.send(jobs[start:min(start+10, len(jobs))]); err != nil {
			p.t.Fatal(err)
		}
	}
}

// send enqueues up to ten jobs with one call.
func (p *pipeline) send(jobs []job.Job) error {
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i, j := range jobs {
		body, err := job.Encode(j)
		if err != nil {
			return err
		}
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: &body})
	}
	out, err := p.sqs.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: &p.changesURL, Entries: entries})
	if err != nil {
		return err
	}
	if len(out.Failed) > 0 {
		return fmt.Errorf("enqueue: %d failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
	}
	p.sends.Add(int64(len(entries)))
	return nil
}

// stream enqueues jobs ten at a time at perSecond, as PMS changes arrive.
// It runs in its own goroutine, so it reports failures with Errorf.
func (p *pipeline) stream(jobs []job.Job, perSecond float64) {
	tick := time.NewTicker(time.Duration(float64(10*time.Second) / perSecond))
	defer tick.Stop()
	for start := 0; start < len(jobs); start += 10 {
		if err := p.send(jobs[start:min(start+10, len(jobs))]); err != nil {
			p.t.Errorf("stream: %v", err)
			return
		}
		<-tick.C
	}
}

// run works both queues with n workers each until done() or the timeout.
// As with Lambda, where each event source mapping has its own maximum
// concurrency, a poller per queue hands batches to whichever of its n
// workers (instances) is free; each worker keeps its own limiter state.
// (One pool shared by both pollers would hold received batches while they
// wait for a worker, making deferred jobs late by the queueing.)
func (p *pipeline) run(n int, timeout time.Duration, done func() bool, o workerOpts) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stop := p.start(ctx, n, o)
	for ctx.Err() == nil && !done() {
		sleep(ctx, 100*time.Millisecond)
	}
	if ctx.Err() != nil {
		p.t.Errorf("pipeline did not finish within %v", timeout)
	}
	stop()
}

// runUntil works the queues as run does until progress() reaches want. It
// gives up when progress stalls for stall, or at limit: a fleet paced in
// real time against emulators that share two cores with other test
// binaries finishes when the emulators let it, so only a pipeline that
// stops moving is a failure, not a slow one.
func (p *pipeline) runUntil(n int, want int, progress func() int, stall, limit time.Duration, o workerOpts) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	stop := p.start(ctx, n, o)
	last, lastAt := -1, time.Now()
	for ctx.Err() == nil {
		got := progress()
		if got >= want {
			break
		}
		if got != last {
			last, lastAt = got, time.Now()
		}
		if time.Since(lastAt) > stall {
			p.t.Errorf("pipeline stalled at %d of %d for %v; what became of the jobs: %s", got, want, stall, p.tally())
			break
		}
		sleep(ctx, 100*time.Millisecond)
	}
	if ctx.Err() != nil {
		p.t.Errorf("pipeline did not finish within %v (%d of %d); what became of the jobs: %s", limit, progress(), want, p.tally())
	}
	stop()
}

// tally counts the results so far by outcome and reason, for a message.
func (p *pipeline) tally() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := map[string]int{}
	for _, rs := range p.results {
		for _, r := range rs {
			k := string(r.Outcome)
			if r.Reason != "" {
				k += " (" + r.Reason[:min(len(r.Reason), 80)] + ")"
			}
			if r.StoreError {
				k += " [store error]"
			}
			n[k]++
		}
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %5d %s", n[k], k)
	}
	return b.String()
}

// start runs a poller on each queue, each with n workers, until ctx ends
// or stop is called; stop waits for the batches in hand.
func (p *pipeline) start(ctx context.Context, n int, o workerOpts) (stop func()) {
	p.t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, url := range []string{p.changesURL, p.deferredURL} {
		pool := make(chan payloadjob.Dispatcher, n)
		for range n {
			pool <- p.payload(o)
		}
		pl := &poller.Poller{SQS: p.sqs, QueueURL: url, Visibility: 60 * time.Second, Concurrency: n, ShortPoll: 20 * time.Millisecond, Handler: p.handler(pool),
			OnError: func(err error) { p.t.Logf("poller: %v", err) }}
		wg.Go(func() { pl.Run(ctx) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// handler is what the sync Lambda does with a batch: every message is
// handled; the ones whose handling failed stay on the queue.
func (p *pipeline) handler(pool chan payloadjob.Dispatcher) poller.Handler {
	return func(ctx context.Context, msgs []sqstypes.Message) ([]string, error) {
		d := <-pool
		defer func() { pool <- d }()
		takenUp := time.Now()
		// As the sync function does: decode the batch, then dispatch its
		// jobs together, each waiting for its own slot concurrently.
		var (
			failed []string
			jobs   []job.Job
			ids    []string
		)
		record := func(id string, res dispatch.Result, err error) {
			if err != nil {
				failed = append(failed, id)
				return
			}
			p.mu.Lock()
			p.results[res.JobID] = append(p.results[res.JobID], res)
			p.mu.Unlock()
		}
		for _, m := range msgs {
			j, err := job.Decode(aws.ToString(m.Body))
			if err != nil {
				res, err := d.Handle(ctx, aws.ToString(m.Body)) // dead-letters it
				record(aws.ToString(m.MessageId), res, err)
				continue
			}
			jobs, ids = append(jobs, j), append(ids, aws.ToString(m.MessageId))
			if !j.Due.IsZero() {
				p.mu.Lock()
				p.arrivals[j.ID] = append(p.arrivals[j.ID], arrival{at: takenUp, due: j.Due, slot: j.Hold.At})
				p.mu.Unlock()
			}
		}
		results, errs := d.HandleJobs(ctx, jobs)
		for i := range jobs {
			record(ids[i], results[i], errs[i])
		}
		return failed, nil
	}
}

func (p *pipeline) outcomes(id string) []dispatch.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]dispatch.Result(nil), p.results[id]...)
}

// deferralsPerJob returns the most deferrals any job took, and the total.
func (p *pipeline) deferralsPerJob() (most, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rs := range p.results {
		n := 0
		for _, r := range rs {
			if r.Outcome == dispatch.Deferred && !silenced(r) {
				n++
			}
		}
		most, total = max(most, n), total+n
	}
	return most, total
}

// explain logs what the fleet and the vendor saw of one job.
func (p *pipeline) explain(id string) {
	for _, r := range p.outcomes(id) {
		p.t.Logf("  %s: %s slot %v wait %v attempts %d throttled %d wasted %d; delivered %v late of %v; reason %q", id, r.Outcome, r.Slot.Format("15:04:05.000"),
			r.Wait, r.Attempts, r.Throttled, r.WastedSlots, r.Lateness.Round(time.Millisecond), r.Delayed, r.Reason)
	}
	p.mu.Lock()
	arrivals := append([]arrival(nil), p.arrivals[id]...)
	p.mu.Unlock()
	for _, a := range arrivals {
		p.t.Logf("  %s: taken up %v after its due time, %v after its slot %v", id, a.at.Sub(a.due).Round(time.Millisecond),
			a.at.Sub(a.slot).Round(time.Millisecond), a.slot.Format("15:04:05.000"))
	}
	for _, r := range p.ota.Requests() {
		if r.JobID == id {
			p.t.Logf("  %s: vendor answered %d at %v", id, r.Status, r.At.Format("15:04:05.000"))
		}
	}
}

// reDeferrals counts deferrals of jobs that already held a slot when they
// came back: the waste reservations exist to avoid.
func (p *pipeline) reDeferrals() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, rs := range p.results {
		deferrals := 0
		for _, r := range rs {
			if r.Outcome == dispatch.Deferred && !silenced(r) {
				deferrals++
			}
		}
		n += max(deferrals-1, 0)
	}
	return n
}

// silenced reports whether r is a job sent back to the end of a 429's
// silence, its slot lying inside it: a deferral the vendor asked for,
// which the counts of deferrals for a slot leave out.
func silenced(r dispatch.Result) bool { return strings.Contains(r.Reason, "inside the silence") }

// assertExactlyOnce checks every job was accepted by the vendor once.
func (p *pipeline) assertExactlyOnce(jobs []job.Job) {
	p.t.Helper()
	byJob := p.ota.AcceptedByJob()
	for _, j := range jobs {
		if byJob[j.ID] != 1 {
			p.t.Errorf("job %s accepted %d times, want exactly once", j.ID, byJob[j.ID])
			if byJob[j.ID] > 1 {
				p.explain(j.ID)
			}
		}
	}
	if len(byJob) != len(jobs) {
		p.t.Errorf("vendor accepted %d distinct jobs, want %d", len(byJob), len(jobs))
	}
}

// receiveDLQ drains the dead-letter queue, returning body → reason.
func (p *pipeline) receiveDLQ() map[string]string {
	p.t.Helper()
	got := map[string]string{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := p.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &p.dlqURL, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}, WaitTimeSeconds: 1,
		})
		if err != nil {
			p.t.Fatal(err)
		}
		// A loaded emulator's long poll can come back empty with a
		// message on the queue: the queue's count decides, not one
		// empty answer.
		if len(out.Messages) == 0 && (p.dlqCount() == 0 || time.Now().After(deadline)) {
			return got
		}
		for _, m := range out.Messages {
			got[aws.ToString(m.Body)] = aws.ToString(m.MessageAttributes[queue.ReasonAttribute].StringValue)
			_, _ = p.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &p.dlqURL, ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// dlqCount is how many messages the dead-letter queue holds, visible or
// not.
func (p *pipeline) dlqCount() int {
	p.t.Helper()
	out, err := p.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &p.dlqURL,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		p.t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n
}

var errInjected = errors.New("injected outage")
