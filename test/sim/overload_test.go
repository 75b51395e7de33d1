package sim

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A burst at 10× the rate, with consumers keeping up: every job is
// deferred at most once, because it owns its slot when it comes back; and
// none is pushed before its slot.
//
// "Keeping up" is the premise: the queue hands each deferred job back
// within the lead it was deferred with plus its slot's grace. Here it
// hands them back up to 300 ms late (T = 400 ms, so a slot may be used up
// to (4−1)·T/2 = 600 ms late). The worker defers every slot that is not
// now (manualDispatcher), so each job booked ahead is deferred once. A job taken up
// later than that has lost its slot, which the dispatcher rightly books
// again: the emulators' version of this test met that on a loaded
// machine, where moto's SQS handed jobs back seconds late.
func TestOverloadDefersEachJobAtMostOnce(t *testing.T) {
	lim := limiter.PerSecond(2.5, 4)
	clock := newClock()
	ota := startOTA(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow, Now: clock.Now, OmitRateLimitHeaders: true})
	store := memStore(t)
	sent := &sentMessages{}
	d := manualDispatcher(t, oneRoute{ota: ota, limit: lim}, clock, &dynamotest.Counter{DB: store}, sent)
	ctx := context.Background()
	t0 := clock.Now()

	// 50 jobs, 20 s of quota, arrive at once in batches of ten.
	all := make([]job.Job, 50)
	for i := range all {
		all[i] = job.Job{ID: fmt.Sprintf("job-%04d", i), Channel: "booking_com", Credential: "cred-1", Endpoint: "availability",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), FirstSeen: t0}
	}
	results := map[string][]dispatch.Result{}
	for start := 0; start < len(all); start += 10 {
		res, errs := d.HandleJobs(ctx, all[start:start+10])
		for i, r := range res {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			results[r.JobID] = append(results[r.JobID], r)
		}
	}
	pending := sent.takeJobs(t, deferredURL)
	// Each job comes back late by 0–300 ms, by its number.
	at := func(j job.Job) time.Time {
		return deliverAt(j).Add(time.Duration(j.ID[len(j.ID)-1]-'0') % 4 * 100 * time.Millisecond)
	}
	for n := 0; len(pending) > 0; n++ {
		if n > 10*len(all) {
			t.Fatalf("%d jobs still queued after %d deliveries", len(pending), n)
		}
		sort.SliceStable(pending, func(i, j int) bool { return at(pending[i]).Before(at(pending[j])) })
		j := pending[0]
		pending = pending[1:]
		if when := at(j); when.After(clock.Now()) {
			clock.Set(when)
		}
		r, err := d.HandleJob(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		results[j.ID] = append(results[j.ID], r)
		pending = append(pending, sent.takeJobs(t, deferredURL)...)
	}
	if dead := sent.take(deadURL); len(dead) != 0 {
		t.Errorf("%d jobs dead-lettered, want none", len(dead))
	}

	byJob := ota.AcceptedByJob()
	arrivals := map[string]time.Time{}
	for _, r := range ota.Accepted() {
		arrivals[r.JobID] = r.At
	}
	total := 0
	for _, j := range all {
		if byJob[j.ID] != 1 {
			t.Errorf("job %s accepted %d times, want exactly once", j.ID, byJob[j.ID])
		}
		deferrals := 0
		for _, r := range results[j.ID] {
			switch r.Outcome {
			case dispatch.Deferred:
				deferrals++
			case dispatch.Pushed:
				if arrivals[j.ID].Before(r.Slot) {
					t.Errorf("job %s pushed at t0+%v, before its slot t0+%v", j.ID, arrivals[j.ID].Sub(t0), r.Slot.Sub(t0))
				}
			}
		}
		total += deferrals
		if deferrals > 1 {
			t.Errorf("job %s deferred %d times, want at most once: %+v", j.ID, deferrals, results[j.ID])
		}
	}
	if total < len(all)/2 {
		t.Errorf("only %d deferrals: the bucket was not saturated, so the test proves nothing", total)
	}
	if n := ota.Count429(); n != 0 {
		t.Errorf("the vendor answered %d 429s, want none at the fleet's own limit", n)
	}
	accepted := ota.AcceptedTimes("cred-1", "availability")
	if err := window.Check(accepted, window.Limit{Rate: lim.Rate, Burst: lim.Burst}); err != nil {
		t.Error(err)
	}
	t.Logf("50 jobs at 10× overload: %d deferrals, last arrival at t0+%v", total, accepted[len(accepted)-1].Sub(t0))
}
