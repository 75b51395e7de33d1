package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

func makeJobs(n int, endpoint string) []job.Job {
	jobs := make([]job.Job, n)
	now := time.Now()
	for i := range jobs {
		jobs[i] = pushJob(i, endpoint, now)
	}
	return jobs
}

// (a) 40 workers, 300 jobs, one credential, a vendor with the same limit:
// every job lands exactly once, under the limit, with no 429 in steady state.
//
// The jobs arrive as a stream slightly faster than the limit (12/s against
// 10/s), so the bucket stays saturated for half a minute and a backlog
// builds up in the deferred queue. (1000 jobs took 100 s of the suite's
// time and checked nothing more: the fleet's pacing over long runs is the
// simulation's, test/sim.) They are not enqueued all at once: moto's SQS costs time
// in proportion to queue depth (a receive from a 1000-deep queue takes
// ~600 ms), which would make the emulator, not the fleet, the subject. The
// rate is modest because 80 simulated instances share 2 cores with the
// emulators and the race detector: at 25/s a starved fleet ran late,
// expired its slots and re-deferred, which real instances, each with its
// own CPU, do not.
//
// For the same reason the workers use patientPolicy, and the run ends when
// every job has landed, however long the emulators take, unless it stops
// moving for a minute. With the default lead, on a machine that other test
// binaries loaded, deferred jobs came back later than their slots'
// grace, were booked again (wasting their slots), and the extra SQS
// traffic slowed moto's SQS further: 229 of the 1000 jobs landed in 4
// minutes, with 12 SQS messages a push.
//
// The fleet's bucket keeps a margin (docs/design.md, the margin). Without
// one, a job may use its slot up to half the burst's refill late (450 ms
// here) and the design allows the vendor's window (b − 1)/2 requests over
// b + r·W: on a loaded emulator, whose grants are answered hundreds of ms
// after the now they claim, the vendor answered 5 to 17 429s after the
// opening seconds (4 runs of 5, load 14-22), which measured the machine.
// A margin of 600 ms keeps the refill free that a slot used up to its
// grace (450 ms) late and the send's own latency need, so that 0 429s is
// what the design promises here however slow the emulator is.
func TestFleetPushesUnderTheVendorLimit(t *testing.T) {
	lim := limiter.PerSecond(10, 10)
	p := newPipeline(t, withMargin(lim, 600*time.Millisecond), mockota.Config{Limit: lim})
	jobs := makeJobs(300, "availability")
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		p.stream(jobs, 12)
	}()
	p.runUntil(40, len(jobs), func() int { return len(p.ota.AcceptedByJob()) }, time.Minute, 20*time.Minute, workerOpts{policy: patientPolicy()})
	<-streamed
	p.assertExactlyOnce(jobs)
	times := p.ota.AcceptedTimes("cred-1", "availability")
	assertFleetInvariant(t, times, lim, 0)
	if steady := p.steady429s(); steady > 0 {
		t.Errorf("%d 429s in steady state (of %d in all), want 0", steady, p.ota.Count429())
	}
	p.report("300 jobs streamed at 12/s, 40 workers", lim, times)
	p.assertNoPushBeforeSlot(jobs)
}

// steady429s counts the 429s after the opening five seconds. The vendor
// starts with a full bucket, and a full bucket has no tolerance for send
// jitter: the fleet's slot for a grant is the moment it decided, and the
// push leaves once the conditional write has returned, which on a loaded
// emulator takes 0–300 ms depending on how many workers queue for it. If
// the opening burst's pushes are delayed more than the ones after it, the
// later ones are early by the vendor's clock. Once the fleet is saturated,
// the vendor absorbs send jitter up to (burst − 1)·T, and any 429 is a
// real failure.
func (p *pipeline) steady429s() int {
	reqs := p.ota.Requests()
	n := 0
	for _, r := range reqs {
		if r.Status == 429 && r.At.After(reqs[0].At.Add(5*time.Second)) {
			n++
		}
	}
	return n
}

// report logs the numbers the README quotes.
func (p *pipeline) report(what string, lim limiter.Limit, times []time.Time) {
	most, total := p.deferralsPerJob()
	elapsed := times[len(times)-1].Sub(times[0])
	p.t.Logf("%s: %d pushes in %v (%.1f/s after the burst, limit %g/s); 429s %d; deferrals %d, most per job %d, re-deferrals %d; SQS messages per push %.2f",
		what, len(times), elapsed.Round(time.Millisecond), float64(len(times)-lim.Burst)/elapsed.Seconds(), lim.Rate,
		p.ota.Count429(), total, most, p.reDeferrals(), float64(p.sends.Load())/float64(len(times)))
}

// (c) Every push arrives at or after the slot its job held.
func (p *pipeline) assertNoPushBeforeSlot(jobs []job.Job) {
	p.t.Helper()
	arrivals := map[string]time.Time{}
	for _, r := range p.ota.Accepted() {
		arrivals[r.JobID] = r.At
	}
	for _, j := range jobs {
		for _, res := range p.outcomes(j.ID) {
			if res.Outcome == dispatch.Pushed && arrivals[j.ID].Before(res.Slot) {
				p.t.Errorf("job %s pushed at %v, before its slot %v", j.ID, arrivals[j.ID], res.Slot)
			}
		}
	}
}

// (d) A wait past SQS's 15-minute maximum chains: 900 s legs, the due time
// carried in the message, and the push only once the slot has come.
func TestLongWaitChains(t *testing.T) {
	t.Parallel()
	lim := limiter.PerMinute(1.0/60, 1) // one token an hour
	clock := newClock()
	p := newPipeline(t, lim, mockota.Config{Limit: lim, Now: clock.Now})
	rec := &recordingSQS{countingSQS: countingSQS{emulator.SQS(t), &p.sends}}
	d := p.payload(workerOpts{now: clock.Now, sqs: rec})
	d.Sleep = clock.Sleep
	ctx := context.Background()
	t0 := clock.Now()
	first := pushJob(1, "availability", t0)
	if res, err := d.HandleJob(ctx, first); err != nil || res.Outcome != dispatch.Pushed {
		t.Fatalf("first job: %+v %v, want pushed (the bucket starts full)", res, err)
	}
	second := pushJob(2, "availability", t0)
	body := mustEncode(t, second)
	steps := []struct {
		at        time.Duration // when the message is handled
		outcome   dispatch.Outcome
		delay     int32 // DelaySeconds sent
		notBefore time.Duration
	}{
		{0, dispatch.Deferred, 900, 2700 * time.Second}, // slot at +1h: reservable from +45m
		{900 * time.Second, dispatch.Deferred, 900, 2700 * time.Second},
		{1800 * time.Second, dispatch.Deferred, 900, 0}, // last leg, exactly 900 s
		// Reserves the slot at +1h and comes back early by the lateness
		// allowed for (10% of the wait), re-deferring the rest closer in.
		{2700 * time.Second, dispatch.Deferred, 810, 0},
		{3510 * time.Second, dispatch.Deferred, 81, 0},
		{3591 * time.Second, dispatch.Deferred, 7, 0}, // back BlockThreshold (2 s) before the slot
		{3598 * time.Second, dispatch.Pushed, 0, 0},   // sleeps the rest, pushes at the slot
	}
	for i, s := range steps {
		clock.Set(t0.Add(s.at))
		res, err := d.Handle(ctx, body)
		if err != nil || res.Outcome != s.outcome {
			t.Fatalf("step %d at +%v: %+v, %v; want %s", i, s.at, res, err, s.outcome)
		}
		if s.outcome == dispatch.Pushed {
			break
		}
		sent := rec.last()
		if sent.DelaySeconds != s.delay {
			t.Fatalf("step %d: DelaySeconds %d, want %d", i, sent.DelaySeconds, s.delay)
		}
		next, err := job.Decode(*sent.MessageBody)
		if err != nil {
			t.Fatal(err)
		}
		if got := next.NotBefore; (s.notBefore == 0) != got.IsZero() || (!got.IsZero() && !got.Equal(t0.Add(s.notBefore))) {
			t.Fatalf("step %d: not_before %v, want +%v", i, got.Sub(t0), s.notBefore)
		}
		body = *sent.MessageBody
	}
	if n := p.ota.AcceptedByJob()["job-0002"]; n != 1 {
		t.Fatalf("the chained job was accepted %d times", n)
	}
	if at := p.ota.Accepted()[1].At; at.Before(t0.Add(time.Hour)) {
		t.Fatalf("the chained job was pushed at +%v, before its slot at +1h", at.Sub(t0))
	}
}

// recordingSQS keeps the last message sent, still sending it for real.
type recordingSQS struct {
	countingSQS
	sent []*sqs.SendMessageInput
}

func (r *recordingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	r.sent = append(r.sent, in)
	return r.countingSQS.SendMessage(ctx, in, o...)
}

func (r *recordingSQS) last() *sqs.SendMessageInput { return r.sent[len(r.sent)-1] }

func mustEncode(t *testing.T, j job.Job) string {
	t.Helper()
	body, err := job.Encode(j)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// (e) A job whose slot would land after its deadline is shed to the DLQ
// with the reason, and the bucket keeps every token.
func TestShedOnDeadlineSpendsNoToken(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(1, 2)
	clock := newClock()
	p := newPipeline(t, lim, mockota.Config{Limit: lim, Now: clock.Now})
	d := p.payload(workerOpts{now: clock.Now})
	d.Sleep = func(context.Context, time.Duration) error { return nil }
	ctx := context.Background()
	t0 := clock.Now()
	for i := range 2 { // empty the bucket
		if res, err := d.HandleJob(ctx, pushJob(i, "availability", t0)); err != nil || res.Outcome != dispatch.Pushed {
			t.Fatalf("job %d: %+v %v", i, res, err)
		}
	}
	lim0, _ := limiter.New(emulator.DynamoDB(t), limiter.WithTable(p.table), limiter.WithClock(clock.Now))
	bucket := limiter.Bucket{Key: "booking_com#cred-1#availability", Limit: lim}
	before, err := lim0.State(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	late := pushJob(7, "availability", t0)
	late.Deadline = t0.Add(500 * time.Millisecond) // the next token is 1 s away
	expired := pushJob(8, "availability", t0.Add(-time.Hour))
	expired.Deadline = t0.Add(-time.Minute)
	for _, j := range []job.Job{late, expired} {
		res, err := d.HandleJob(ctx, j)
		if err != nil || res.Outcome != dispatch.Shed {
			t.Fatalf("job %s: %+v %v, want shed", j.ID, res, err)
		}
	}
	after, err := lim0.State(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if !after.TAT.Equal(before.TAT) {
		t.Fatalf("shedding moved tat from %v to %v: a token was spent", before.TAT, after.TAT)
	}
	dlq := p.receiveDLQ()
	if len(dlq) != 2 {
		t.Fatalf("DLQ has %d messages, want 2: %v", len(dlq), dlq)
	}
	for body, reason := range dlq {
		if !strings.Contains(reason, "deadline") {
			t.Errorf("DLQ message %s has reason %q, want one naming the deadline", body, reason)
		}
	}
}

// (f) With the limiter store down nothing is pushed: every job is deferred,
// and with SQS down too, every message stays on its queue. None is lost.
func TestStoreDownFailsClosed(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(20, 5)
	p := newPipeline(t, lim, mockota.Config{Limit: lim})
	deadDB := &dynamotest.Faulty{DB: emulator.DynamoDB(t), F: dynamotest.Fault{Before: func(string) error { return errInjected }}}
	d := p.payload(workerOpts{db: deadDB})
	ctx := context.Background()
	jobs := makeJobs(20, "availability")
	for _, j := range jobs {
		res, err := d.HandleJob(ctx, j)
		if err != nil || res.Outcome != dispatch.Deferred || !res.StoreError {
			t.Fatalf("job %s with the store down: %+v %v, want deferred for a store error", j.ID, res, err)
		}
		if res.Wait < dispatch.DefaultPolicy.StoreCooldown {
			t.Fatalf("deferred for %v, want at least the store cooldown", res.Wait)
		}
	}
	if n := len(p.ota.Requests()); n != 0 {
		t.Fatalf("%d requests reached the vendor with the limiter store down", n)
	}
	if n := deadDB.Calls(); n > 3 {
		t.Errorf("%d calls reached the dead store; the circuit breaker should have stopped them after 3", n)
	}
	// SQS down as well: the dispatcher reports failure, so the message stays.
	deadSQS := failingSQS{}
	d2 := p.payload(workerOpts{db: deadDB, sqs: deadSQS})
	for _, j := range jobs[:5] {
		if res, err := d2.HandleJob(ctx, j); err == nil {
			t.Fatalf("job %s with store and queue down: %+v and no error; the message would be deleted and lost", j.ID, res)
		}
	}
	if n := len(p.ota.Requests()); n != 0 {
		t.Fatalf("%d requests reached the vendor", n)
	}
}

type failingSQS struct{}

func (failingSQS) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errInjected
}

// Bad input: malformed messages and unknown channels or endpoints go to the
// DLQ with the reason, and the message is done with.
func TestMalformedAndUnroutableJobsAreDeadLettered(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(20, 5)
	p := newPipeline(t, lim, mockota.Config{Limit: lim})
	d := p.payload(workerOpts{})
	unknownChannel := pushJob(1, "availability", time.Now())
	unknownChannel.Channel = "trivago"
	unknownEndpoint := pushJob(2, "inventory", time.Now())
	tests := []struct {
		name, body, reason string
	}{
		{"not JSON", `{"v":1,"id":`, "malformed job message"},
		{"missing fields", `{"v":1,"id":"x"}`, "channel is empty"},
		{"unknown channel", mustEncode(t, unknownChannel), `unknown channel "trivago"`},
		{"unknown endpoint", mustEncode(t, unknownEndpoint), `no endpoint "inventory"`},
	}
	for _, tt := range tests {
		res, err := d.Handle(context.Background(), tt.body)
		if err != nil || res.Outcome != dispatch.DeadLettered || !strings.Contains(res.Reason, tt.reason) {
			t.Errorf("%s: %+v %v, want dead-lettered with %q", tt.name, res, err, tt.reason)
		}
	}
	dlq := p.receiveDLQ()
	if len(dlq) != len(tests) {
		t.Fatalf("DLQ holds %d messages, want %d", len(dlq), len(tests))
	}
	for _, tt := range tests[:2] {
		if reason, ok := dlq[tt.body]; !ok || !strings.Contains(reason, tt.reason) {
			t.Errorf("DLQ lacks %q with its reason (got %q)", tt.body, reason)
		}
	}
	if n := len(p.ota.Requests()); n != 0 {
		t.Errorf("%d bad jobs reached the vendor", n)
	}
	_ = queue.ReasonAttribute
}
