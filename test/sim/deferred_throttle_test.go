package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/payloadjob"
)

// The configured 20/s is twice what the vendor takes (10/s, enforced with
// the mock's own sliding window), and 300 jobs were booked at 20/s, 15 s
// ahead, and deferred to their slots. The first push over the vendor's
// limit earns a 429, which halves the rate. Every slot booked before that
// throttle is then confirmed at its slot and booked again at the rate that
// holds, instead of earning a 429 of its own and halving the rate again on
// each one (before the fix: a 429 on about every other slot, and the rate
// down to its floor). So the rate halves once, the vendor answers one 429
// (the probe the configured rate was), and every job arrives once.
//
// Time is a manual clock shared by the fleet and the vendor; the store is
// the in-memory DynamoDB, and the test is the queue: every deferred job is
// encoded as the dispatcher sends it, decoded, and handed back at its
// slot (a job deferred with no slot, at its due time), earliest first.
func TestDeferredSlotsAfterAThrottleHalveOnce(t *testing.T) {
	const jobs = 300 // 15 s at 20/s
	clock := newClock()
	ota := startOTA(t, mockota.Config{Limit: limiter.PerSecond(10, 2), Enforce: mockota.EnforceWindow,
		Now: clock.Now, OmitRateLimitHeaders: true})
	// A long quiet period: no probe above 10/s within the test, so the
	// first 429 is the only one the vendor may answer.
	routes := oneRoute{ota: ota, limit: limiter.PerSecond(20, 2), adaptive: &limiter.Adaptive{MinRate: 1, Quiet: 5 * time.Minute, Increase: 1}}
	store := memStore(t)
	calls := &dynamotest.Counter{DB: store}
	sent := &sentMessages{}
	d := manualDispatcher(t, routes, clock, calls, sent)
	ctx := context.Background()
	t0 := clock.Now()

	// Thirty batches of ten arrive at t0; each batch books its slots with
	// one write. The two slots at t0 (the burst) are pushed at once, the
	// rest deferred to their slots.
	all := make([]job.Job, jobs)
	for i := range all {
		all[i] = job.Job{ID: fmt.Sprintf("job-%04d", i), Channel: "booking_com", Credential: "cred-1", Endpoint: "rates",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), FirstSeen: t0}
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
	pending := sent.takeJobs(t, deferredURL)
	if len(pending) != deferred {
		t.Fatalf("%d jobs on the deferred queue, want the %d deferred", len(pending), deferred)
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
		pending = append(pending, sent.takeJobs(t, deferredURL)...)
	}
	if dead := sent.take(deadURL); len(dead) != 0 {
		t.Errorf("%d jobs dead-lettered, want none", len(dead))
	}

	byJob := ota.AcceptedByJob()
	for _, j := range all {
		if byJob[j.ID] != 1 {
			t.Errorf("job %s accepted %d times, want exactly once: %v", j.ID, byJob[j.ID], history[j.ID])
		}
	}
	if n := ota.Count429(); n > 1 {
		t.Errorf("the vendor answered %d 429s, want at most 1 (the first push over its limit)", n)
	}
	accepted := ota.AcceptedTimes("cred-1", "rates")
	if err := window.Check(accepted, window.Limit{Rate: 10, Burst: 2}); err != nil {
		t.Error(err)
	}
	lim, err := limiter.New(store, limiter.WithTable("limits"), limiter.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	st, err := lim.State(ctx, limiter.Bucket{Key: config.BucketKey("booking_com", "cred-1", "rates"), Limit: routes.limit, Adaptive: routes.adaptive})
	if err != nil {
		t.Fatal(err)
	}
	if st.Adapt.Version != 1 || math.Abs(st.Rate-10) > 1e-9 {
		t.Errorf("learned state %v at %.4g/s, want the rate halved once: version 1 at 10/s", st.Adapt, st.Rate)
	}
	if len(accepted) == 0 {
		t.Fatal("the vendor accepted nothing")
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
		ota.Count429(), accepted[len(accepted)-1].Sub(t0), deliveries, reads, float64(reads)/float64(len(accepted)), calls.Updates())
}

const deferredURL, deadURL = "deferred", "dlq"

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
// the clock, defers into sent (the test delivers), and pushes once per job
// (a 429 defers the job: the retry's own Wait would sleep in real time).
func manualDispatcher(t *testing.T, routes payloadjob.Router, clock *limitertest.Clock, db limiter.DynamoDBAPI, sent *sentMessages) payloadjob.Dispatcher {
	t.Helper()
	lim, err := limiter.New(db, limiter.WithTable("limits"), limiter.WithClock(clock.Now))
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
	d := payloadjob.Dispatcher{Dispatcher: &dispatch.Dispatcher{Limiter: lim, Pusher: push, Policy: policy, Now: clock.Now, Log: quiet, Fence: lim.FirstAfter,
		Sleep: func(_ context.Context, w time.Duration) error { clock.Advance(w); return nil },
		Queue: &queue.Queue{SQS: sent, DeferredURL: deferredURL, DeadURL: deadURL, Now: clock.Now},
	}, Routes: routes}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}
