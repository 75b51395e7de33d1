package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// requestsFor is what the vendor received for one job id: every request,
// refused ones included.
func requestsFor(ota *mockota.Server, id string) []mockota.Request {
	var out []mockota.Request
	for _, r := range ota.Requests() {
		if r.JobID == id {
			out = append(out, r)
		}
	}
	return out
}

// Two copies of one payload job (SQS delivers at least once; a send retried
// after its answer was lost is a second message) reach two workers, and each
// books a slot of its own before pushing: the vendor gets one request. The
// fence names the job and its try, not the slot a copy happens to hold.
func TestDuplicatePayloadJobPushesOnce(t *testing.T) {
	lim := limiter.PerSecond(10, 20)
	tests := []struct {
		name string
		copy func(j job.Job, now time.Time) job.Job
	}{
		{"first deliveries, no slot yet", func(j job.Job, _ time.Time) job.Job { return j }},
		{"deferred copies whose slot expired", func(j job.Job, now time.Time) job.Job {
			j.Deferrals, j.Hold.At = 1, now.Add(-time.Minute) // each re-acquires a slot
			return j
		}},
		{"one copy deferred, the other a first delivery", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPipeline(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow})
			now := time.Now()
			j := pushJob(1, "availability", now)
			a, b := j, j
			if tt.copy != nil {
				a, b = tt.copy(j, now), tt.copy(j, now)
			} else {
				a.Deferrals, a.Hold.At = 2, now.Add(-time.Minute)
			}
			var outcomes []dispatch.Outcome
			for _, c := range []job.Job{a, b} {
				res, err := p.payload(workerOpts{}).HandleJob(context.Background(), c)
				if err != nil {
					t.Fatal(err)
				}
				outcomes = append(outcomes, res.Outcome)
				if res.Outcome == dispatch.Pushed && res.Slot.IsZero() {
					t.Errorf("a copy pushed without a slot: %+v", res)
				}
			}
			slices.Sort(outcomes)
			if got := requestsFor(p.ota, j.ID); len(got) != 1 || got[0].Status != 200 {
				t.Errorf("the vendor received %d requests for %s (%+v), want exactly one, accepted", len(got), j.ID, got)
			}
			if want := []dispatch.Outcome{dispatch.Coalesced, dispatch.Pushed}; !slices.Equal(outcomes, want) {
				t.Errorf("outcomes %v, want %v", outcomes, want)
			}
			if n := p.ota.Count429(); n != 0 {
				t.Errorf("%d 429s, want 0", n)
			}
		})
	}
}

// Payload jobs that share an ID but not a credential or a payload are two
// pushes (the documented ID "<event id>#<channel>#<endpoint>" is shared by an
// event's pushes to every credential): both reach the vendor, whether they
// come in one batch or one at a time, and a copy of either still pushes
// once.
func TestPayloadJobsSharingAnIDBothArrive(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(10, 20)
	const id = "evt-7#booking_com#availability"
	base := func(now time.Time) job.Job {
		return job.Job{ID: id, Channel: "booking_com", Credential: "cred-1", Endpoint: "availability", Payload: []byte(`{"rooms":1}`), FirstSeen: now}
	}
	others := map[string]func(job.Job) job.Job{
		"another credential": func(j job.Job) job.Job { j.Credential = "cred-2"; return j },
		"another payload":    func(j job.Job) job.Job { j.Payload = []byte(`{"rooms":2}`); return j },
	}
	for name, other := range others {
		for _, batch := range []bool{true, false} {
			t.Run(name+map[bool]string{true: ", in one batch", false: ", one at a time"}[batch], func(t *testing.T) {
				p := newPipeline(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow})
				first := base(time.Now())
				jobs := []job.Job{first, other(first), first} // the last is a copy of the first
				d := p.payload(workerOpts{})
				var outcomes []dispatch.Outcome
				if batch {
					results, errs := d.HandleJobs(context.Background(), jobs)
					for i, res := range results {
						if errs[i] != nil {
							t.Fatal(errs[i])
						}
						outcomes = append(outcomes, res.Outcome)
					}
				} else {
					for _, j := range jobs {
						res, err := d.HandleJob(context.Background(), j)
						if err != nil {
							t.Fatal(err)
						}
						outcomes = append(outcomes, res.Outcome)
					}
				}
				want := []dispatch.Outcome{dispatch.Pushed, dispatch.Pushed, dispatch.Coalesced}
				if !slices.Equal(outcomes, want) {
					t.Errorf("outcomes %v, want %v (both jobs pushed, the copy coalesced)", outcomes, want)
				}
				var got []string
				for _, r := range requestsFor(p.ota, id) {
					if r.Status == 200 {
						got = append(got, r.Credential+" "+string(r.Body))
					}
				}
				slices.Sort(got)
				var expect []string
				for _, j := range jobs[:2] {
					expect = append(expect, j.Credential+" "+string(j.Payload))
				}
				slices.Sort(expect)
				if !slices.Equal(got, expect) {
					t.Errorf("the vendor accepted %q, want each job once: %q", got, expect)
				}
			})
		}
	}
}
