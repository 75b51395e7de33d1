package integration

import (
	"context"
	"log/slog"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/deferral"
	"github.com/fleetbucket/fleetbucket/sdk/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/job"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
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
	queue := p.receiveDeferred(t, deferred)
	if n := p.depth(p.deferredURL); n != 0 {
		t.Fatalf("%d more jobs on the deferred queue than the %d deferred", n, deferred)
	}
	if last := latestSlot(queue); last.Sub(t0) < 14*time.Second {
		t.Fatalf("the last slot booked is t0+%v, want about 15 s ahead", last.Sub(t0))
	}

	// The queue hands each job back at its slot, earliest first.
	deliveries := 0
	for ; len(queue) > 0; deliveries++ {
		if deliveries > 20*jobs {
			t.Fatalf("%d jobs still queued after %d deliveries", len(queue), deliveries)
		}
		sort.SliceStable(queue, func(i, j int) bool { return deliverAt(queue[i]).Before(deliverAt(queue[j])) })
		j := queue[0]
		queue = queue[1:]
		if at := deliverAt(j); at.After(clock.Now()) {
			clock.Set(at)
		}
		res, err := d.HandleJob(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome == dispatch.Deferred {
			got := p.receiveDeferred(t, 1)
			queue = append(queue, got...)
		}
	}

	p.assertExactlyOnce(all)
	if n := p.ota.Count429(); n > 1 {
		t.Errorf("the vendor answered %d 429s, want at most 1 (the first push over its limit)", n)
	}
	accepted := p.ota.AcceptedTimes("cred-1", "rates")
	if err := window.Check(accepted, window.Limit{Rate: 10, Burst: 2}); err != nil {
		t.Error(err)
	}
	st, err := newWorker(t, p.table, limiter.WithClock(clock.Now)).State(ctx, limiter.Bucket{Key: all[0].BucketKey(), Limit: p.limit, Adaptive: p.adaptive})
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

// deliverAt is when the test's queue hands j back: at its slot, or when
// due for a job that holds none.
func deliverAt(j job.Job) time.Time {
	if !j.Slot.IsZero() {
		return j.Slot
	}
	return j.Due
}

func latestSlot(jobs []job.Job) time.Time {
	var last time.Time
	for _, j := range jobs {
		if j.Slot.After(last) {
			last = j.Slot
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
		Queue: &deferral.Queue{SQS: undelayed{emulator.SQS(t)}, DeferredURL: p.deferredURL, DeadURL: p.dlqURL, Now: clock.Now},
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
