package integration

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A lane job deferred to a slot booked while its adaptive bucket probed
// (alone, or with a batch's other jobs in one write) carries the probe
// through SQS; at its slot the dispatcher confirms it: one that still
// stands is pushed, one that the throttle ending the probe revoked is
// booked again at the rate that held and never reaches the vendor.
func TestDeferredProbingSlotIsConfirmedAtItsSlot(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(20, 2)
	clock := newClock()
	p := newPipeline(t, lim, mockota.Config{Limit: lim, Now: clock.Now, OmitRateLimitHeaders: true})
	p.adaptive = &limiter.Adaptive{MinRate: 1, Quiet: 10 * time.Second, Increase: 1}
	t0 := clock.Now()
	ctx := context.Background()
	d := p.payload(workerOpts{now: clock.Now})
	other := newWorker(t, p.table, limiter.WithClock(clock.Now))
	b, err := p.Route(pushJob(0, "rates", t0))
	if err != nil {
		t.Fatal(err)
	}

	// The configured 20/s is too much: a throttle halves it at t0.
	r0, err := other.Take(ctx, b.Bucket, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Throttle(ctx, b.Bucket, stampOf(r0), t0); err != nil {
		t.Fatal(err)
	}
	// 4 s into the climb (14/s) another worker has booked the next 40
	// slots, so three jobs get probing slots about 3 s ahead and are
	// deferred to them: one reserved alone, two booked as a batch.
	clock.Set(t0.Add(14 * time.Second))
	var held limiter.Reservation
	for range 40 {
		if held, err = other.Reserve(ctx, b.Bucket, 1, 5*time.Second); err != nil || !held.Probing() {
			t.Fatalf("booking the climb ahead: %+v (probing %v), %v", held, held.Probing(), err)
		}
	}
	res, err := d.HandleJob(ctx, pushJob(1, "rates", clock.Now()))
	if err != nil || res.Outcome != dispatch.Deferred {
		t.Fatalf("job 1: %+v, %v; want it deferred to its slot", res, err)
	}
	deferred := p.receiveDeferred(t, 1)
	before := p.lastCounter.Answered()
	results, errs := d.HandleJobs(ctx, []job.Job{pushJob(2, "rates", clock.Now()), pushJob(3, "rates", clock.Now())})
	for i, res := range results {
		if errs[i] != nil || res.Outcome != dispatch.Deferred {
			t.Fatalf("batch job: %+v, %v; want it deferred to its slot", res, errs[i])
		}
	}
	if n := p.lastCounter.Answered() - before; n != 1 {
		t.Fatalf("the batch's two jobs booked with %d writes, want 1", n)
	}
	batch := p.receiveDeferred(t, 2)
	sort.Slice(batch, func(i, j int) bool { return batch[i].Hold.At.Before(batch[j].Hold.At) })
	deferred = append(deferred, batch...)
	for _, j := range deferred {
		if j.Hold.Grant.Interval == 0 {
			t.Fatalf("deferred job %s carries no probe: %+v", j.ID, j)
		}
	}

	// The first comes back at its slot before anything changed: pushed.
	clock.Set(deferred[0].Hold.At)
	res, err = d.HandleJob(ctx, deferred[0])
	if err != nil || res.Outcome != dispatch.Pushed {
		t.Fatalf("first job at its slot: %+v, %v; want pushed", res, err)
	}
	// Then the vendor throttles another worker's probing push: back to
	// 10/s, and the bucket empty for 5 s (its Retry-After).
	if err := other.Throttle(ctx, b.Bucket, stampOf(held), clock.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The batch's slots were revoked: each job is booked again after the
	// penalty, at 10/s, and deferred; the vendor saw only the first push.
	for _, j := range deferred[1:] {
		clock.Set(j.Hold.At)
		res, err = d.HandleJob(ctx, j)
		if err != nil || res.Outcome != dispatch.Deferred || !res.Slot.After(j.Hold.At) {
			t.Fatalf("%s at its revoked slot: %+v, %v; want deferred to a later slot", j.ID, res, err)
		}
		again := p.receiveDeferred(t, 1)[0]
		if again.Hold.Grant.Version != 2 {
			t.Fatalf("the slot booked again carries stamp version %d, want 2 (after the two throttles): %+v", again.Hold.Grant.Version, again)
		}
	}
	if n := len(p.ota.Requests()); n != 1 {
		t.Fatalf("the vendor got %d requests, want 1 (the revoked slot is never spent)", n)
	}
}

// receiveDeferred takes n jobs off the deferred queue, waiting for their
// delays.
func (p *pipeline) receiveDeferred(t *testing.T, n int) []job.Job {
	t.Helper()
	var out []job.Job
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		msgs, err := p.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &p.deferredURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs.Messages {
			j, err := job.Decode(aws.ToString(m.Body))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, j)
			_, _ = p.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &p.deferredURL, ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(out) != n {
		t.Fatalf("%d jobs on the deferred queue after 30 s, want %d", len(out), n)
	}
	return out
}
