package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A normal push denied by its horizon sleeps for the next token; a
// deadline or max age that passes during that sleep must not make the
// retry ask for a negative maxDelay, which the limiter refuses (the job
// would be dead-lettered as "route has an invalid limit"). It is shed
// (deadline) or expired (max age), with no token spent.
func TestDeadlineDuringHorizonSleepIsShed(t *testing.T) {
	t0 := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name   string
		bound  func(j *job.Job)
		want   Outcome
		reason string
	}{
		{"deadline", func(j *job.Job) { j.Deadline = t0.Add(300 * ms) }, Shed, "deadline"},
		// The policy's max age (a day) ends 300 ms after t0.
		{"max age", func(j *job.Job) { j.FirstSeen = t0.Add(300*ms - DefaultPolicy.MaxAge) }, Expired, "expired: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := limitertest.NewClock(t0)
			// The normal share is booked 1.2 s ahead: the next token comes
			// in 449 ms, after the job's bound.
			// limitertest refuses what the limiter refuses, a negative maxDelay
			// among them, with the limiter's error.
			b := bucketAt(t, c, normalShare.Bucket, 1200*ms)
			q := &fakeQueue{}
			p := &timedPusher{clock: c, t0: t0}
			d := &worker{&Dispatcher{Limiter: b, Pusher: p, Queue: q, Policy: DefaultPolicy, Now: c.Now, Sleep: c.Sleep, Can: reserveAndBatch(b),
				Jitter: func(time.Duration) time.Duration { return 0 }}, nil, fixedRoute(normalShare)}
			j := testJob(t0)
			tt.bound(&j)
			res, err := d.HandleJob(context.Background(), j)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.want || !strings.Contains(res.Reason, tt.reason) || len(p.at) != 0 {
				t.Fatalf("outcome %s (%q), %d pushes; want %s with a reason naming the %s, no push", res.Outcome, res.Reason, len(p.at), tt.want, tt.name)
			}
			if tat := tatOf(t, b, normalShare.Bucket); !tat.Equal(t0.Add(1200 * ms)) {
				t.Fatalf("the bucket's tat moved by %v: a token was spent", tat.Sub(t0.Add(1200*ms)))
			}
		})
	}
}
