package integration

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
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
	"github.com/fleetbucket/fleetbucket/test/mockota/window"
)

// The configured 20/s is twice what the vendor takes (10/s, enforced with
// the mock's own sliding window), and 300 jobs were booked at 20/s, 15 s
// ahead, and deferred through SQS to their slots. The first push over the
// vendor's limit earns a 429, which halves the rate. Every slot booked
// before that throttle is then confirmed at its slot and booked again at
// the rate that holds, instead of earning a 429 of its own and halving the
// rate again on each one (before the fix: a 429 on about every other slot,
// and the rate down to its floor). So the rate halves once, the vendor
// answers one 429 (the probe the configured rate was), and every job
// arrives once.
//
// Time is a manual clock shared by the fleet and the vendor, and the test
// is the queue's delivery: SQS carries every deferred job (encoded,
// decoded, with its slot and stamp), but with no delay, and the test hands
// each back at its slot (a job deferred with no slot, at its due time),
// earliest first.
func TestDeferredSlotsAfterAThrottleHalveOnce(t *testing.T) {
	const jobs = 300 // 15 s at 20/s
	clock := newManualClock()
	p := newPipeline(t, limiter.PerSecond(20, 2), mockota.Config{Limit: limiter.PerSecond(10, 2), Enforce: mockota.EnforceWindow,
		Now: clock.Now, OmitRateLimitHeaders: true})
	// A long quiet period: no probe above 10/s within the test, so the
	// first 429 is the only one the vendor may answer.
	p.adaptive = &limiter.Adaptive{MinRate: 1, Quiet: 5 * time.Minute, Increase: 1}
	calls := &dynamotest.Counter{DB: emulator.DynamoDB(t)}
	d := manualDispatcher(t, p, clock, calls)
	ctx := context.Background()
	t0 := clock.Now()

	// Thirty batches of ten arrive at t0; each batch books its slots with
	// one write. The two slots at t0 (the burst) are pushed at once, the
	// rest deferred to their slots.
	all := make([]job.Job, jobs)
	for i := range all {
		all[i] = pushJob(i, "rates", t0)
	}
	deferred := 0
	for start := 0; start < jobs; start += 10 {
		results, errs := d.HandleJobs(ctx, all[start:start+10])
		for i, res := range results {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if res.Outcome == dispatch.Deferred {
				deferred++
			}
		}
	}
	seen := map[string]bool{}
	pending := takeDeferred(t, p, deferred, seen)
	if n := p.depth(p.deferredURL); n != 0 {
		t.Fatalf("%d more jobs on the deferred queue than the %d deferred", n, deferred)
	}
	if last := latestSlot(pending); last.Sub(t0) < 14*time.Second {
		t.Fatalf("the last slot booked is t0+%v, want about 15 s ahead", last.Sub(t0))
	}

	// The queue hands each job back at its slot, earliest first.
	deliveries := 0
	history := map[string][]string{} // what each delivery of a job came to
	for ; len(pending) > 0; deliveries++ {
		if deliveries > 20*jobs {
			t.Fatalf("%d jobs still queued after %d deliveries", len(pending), deliveries)
		}
		sort.SliceStable(pending, func(i, j int) bool { return deliverAt(pending[i]).Before(deliverAt(pending[j])) })
		j := pending[0]
		pending = pending[1:]
		if at := deliverAt(j); at.After(clock.Now()) {
			clock.Set(at)
		}
		res, err := d.HandleJob(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		history[j.ID] = append(history[j.ID], fmt.Sprintf("at t0+%v (slot t0+%v, due t0+%v): %s %q slot t0+%v", clock.Now().Sub(t0), j.Hold.At.Sub(t0), j.Due.Sub(t0), res.Outcome, res.Reason, res.Slot.Sub(t0)))
		if res.Outcome == dispatch.Deferred {
			pending = append(pending, takeDeferred(t, p, 1, seen)...)
		}
		// A send the SDK retried after a lost answer is a second message:
		// take it too, or the message it stood in for waits in the queue.
		if n := visible(t, p); n > 0 {
			pending = append(pending, takeDeferred(t, p, n, seen)...)
		}
	}

	p.assertExactlyOnce(all)
	if t.Failed() {
		byJob := p.ota.AcceptedByJob()
		for _, j := range all {
			if byJob[j.ID] != 1 {
				t.Logf("%s: %v", j.ID, history[j.ID])
			}
		}
	}
	if n := p.ota.Count429(); n > 1 {
		t.Errorf("the vendor answered %d 429s, want at most 1 (the first push over its limit)", n)
	}
	accepted := p.ota.AcceptedTimes("cred-1", "rates")
	if err := window.Check(accepted, window.Limit{Rate: 10, Burst: 2}); err != nil {
		t.Error(err)
	}
	st, err := newWorker(t, p.table, limiter.WithClock(clock.Now)).State(ctx, limiter.Bucket{Key: config.BucketKey("booking_com", "cred-1", "rates"), Limit: p.limit, Adaptive: p.adaptive})
	if err != nil {
		t.Fatal(err)
	}
	if st.Adapt.Version != 1 || math.Abs(st.Rate-10) > 1e-9 {
		t.Errorf("learned state %v at %.4g/s, want the rate halved once: version 1 at 10/s", st.Adapt, st.Rate)
	}
	// At 10/s after the 15 s booked ahead, the last of 300 arrives by
	// about 15 s + 30 s; at a collapsed rate it would take minutes.
	if end := accepted[len(accepted)-1].Sub(t0); end > 47*time.Second {
		t.Errorf("the last job arrived at t0+%v, want by t0+47s (10/s after the 15 s booked at 20/s)", end)
	}
	// What confirming costs: one strongly consistent read per slot booked
	// ahead on an adaptive bucket (here every deferred job, twice for the
	// ones booked again), and nothing else reads.
	reads := calls.Calls() - calls.Updates()
	t.Logf("%d 429s; last arrival at t0+%v; %d deliveries from the queue; %d reads, %.2f per push, %d writes",
		p.ota.Count429(), accepted[len(accepted)-1].Sub(t0), deliveries, reads, float64(reads)/float64(len(accepted)), calls.Updates())
}

// takeDeferred takes the next n messages off the deferred queue, skipping
// any it took before (seen, by message id: a delete that failed lets a
// message come back). A message received but lost on the way here comes
// back after its short visibility timeout.
func takeDeferred(t *testing.T, p *pipeline, n int, seen map[string]bool) []job.Job {
	t.Helper()
	var out []job.Job
	deadline := time.Now().Add(60 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		msgs, err := p.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &p.deferredURL, MaxNumberOfMessages: int32(min(n-len(out), 10)), WaitTimeSeconds: 1, VisibilityTimeout: 5,
		})
		if err != nil {
			t.Logf("receive: %v", err)
			continue
		}
		for _, m := range msgs.Messages {
			if _, err := p.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &p.deferredURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Logf("delete: %v", err)
			}
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			j, err := job.Decode(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, j)
		}
	}
	if len(out) != n {
		t.Fatalf("%d jobs taken off the deferred queue after 60 s, want %d", len(out), n)
	}
	return out
}

// visible counts the deferred queue's visible messages (not those in
// flight: a message whose delete failed comes back, and is skipped).
func visible(t *testing.T, p *pipeline) int {
	t.Helper()
	out, err := p.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &p.deferredURL,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	return n
}

// deliverAt is when the test's queue hands j back: at its slot, or when
// due for a job that holds none.
func deliverAt(j job.Job) time.Time {
	if !j.Hold.At.IsZero() {
		return j.Hold.At
	}
	return j.Due
}

func latestSlot(jobs []job.Job) time.Time {
	var last time.Time
	for _, j := range jobs {
		if j.Hold.At.After(last) {
			last = j.Hold.At
		}
	}
	return last
}

// manualDispatcher is one worker on the manual clock: it sleeps by moving
// the clock, defers through SQS with no delay (the test delivers), and
// pushes once per job (a 429 defers the job: the retry's own Wait would
// sleep in real time).
func manualDispatcher(t *testing.T, p *pipeline, clock *manualClock, db limiter.DynamoDBAPI) *dispatch.Dispatcher {
	t.Helper()
	lim, err := limiter.New(db, limiter.WithTable(p.table), limiter.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	pol := otapush.DefaultPolicy
	pol.MaxAttempts = 1
	push, err := otapush.New(nil, lim, pol, otapush.WithClock(clock.Now), otapush.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	policy := dispatch.DefaultPolicy
	policy.BlockThreshold, policy.LateRatio = 10*time.Millisecond, 0
	d := &dispatch.Dispatcher{
		Routes: p, Limiter: lim, Pusher: push, Policy: policy, Now: clock.Now, Log: quiet, Fence: lim,
		Sleep: func(_ context.Context, w time.Duration) error { clock.Set(clock.Now().Add(w)); return nil },
		Queue: &queue.Queue{SQS: undelayed{emulator.SQS(t)}, DeferredURL: p.deferredURL, DeadURL: p.dlqURL, Now: clock.Now},
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}

// undelayed sends deferred jobs with no delay: the test's manual clock,
// not SQS's, decides when each comes back.
type undelayed struct{ *sqs.Client }

func (u undelayed) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	in.DelaySeconds = 0
	return u.Client.SendMessage(ctx, in, o...)
}

// A throttle revokes the slots booked before it that fall inside its
// Retry-After, even where the rate did not change (here it is at its
// floor): the vendor asked for silence until then. Slots after it, at the
// rate that still holds, stand. Each confirmation reads the bucket once,
// but for one this process already knows is revoked.
func TestSlotsInsideARetryAfterAreRevoked(t *testing.T) {
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newManualClock()
	ctx := context.Background()
	b := limiter.Bucket{Key: "booking_com#cred-1#rates", Limit: limiter.PerSecond(20, 2),
		Adaptive: &limiter.Adaptive{MinRate: 10, Quiet: time.Minute, Increase: 1}}
	w, a := newWorker(t, table, limiter.WithClock(clock.Now)), newWorker(t, table, limiter.WithClock(clock.Now))
	t0 := clock.Now()
	r0, err := a.Take(ctx, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Throttle(ctx, b, stampOf(r0), t0); err != nil { // 20/s → the 10/s floor
		t.Fatal(err)
	}
	// W books 3 s ahead at 10/s.
	var slots []limiter.Reservation
	for range 30 {
		r, err := w.Reserve(ctx, b, 1, 4*time.Second)
		if err != nil || math.Abs(r.Rate-10) > 1e-9 {
			t.Fatalf("booking ahead: %+v, %v; want slots at 10/s", r, err)
		}
		slots = append(slots, r)
	}
	early, late := slots[10], slots[29]
	if early.Slot.After(t0.Add(1500*time.Millisecond)) || late.Slot.Before(t0.Add(2500*time.Millisecond)) {
		t.Fatalf("slots at t0+%v and t0+%v, want one before t0+1.5s and one after t0+2.5s", early.Slot.Sub(t0), late.Slot.Sub(t0))
	}
	// At 0.5 s the vendor throttles a push at 10/s with Retry-After until
	// t0+2s; the rate stays at its floor.
	clock.Set(t0.Add(500 * time.Millisecond))
	if err := a.Throttle(ctx, b, stampOf(slots[0]), t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	confirm := func(r limiter.Reservation, want bool, reads int64) {
		t.Helper()
		clock.Set(r.Slot)
		s, _ := r.Stamp()
		before := w.calls.Calls()
		got, err := w.Confirm(ctx, b, s)
		if err != nil {
			t.Fatal(err)
		}
		if n := w.calls.Calls() - before; got != want || n != reads {
			t.Fatalf("Confirm of the slot at t0+%v = %v after %d reads, want %v after %d", r.Slot.Sub(t0), got, n, want, reads)
		}
	}
	confirm(early, false, 1)     // inside the Retry-After: revoked
	confirm(slots[11], false, 0) // W knows now: no read
	confirm(late, true, 1)       // after it, at the same rate: stands
	if st, err := w.State(ctx, b); err != nil || math.Abs(st.Rate-10) > 1e-9 || st.Adapt.Version != 2 {
		t.Fatalf("state %+v, %v; want version 2 at the 10/s floor", st, err)
	}
}
