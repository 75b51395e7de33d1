package dispatch

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// bucketAt is limitertest's limiter on the test's clock c, so that the
// tests below check the dispatcher's choices, not the bucket's
// arithmetic: bucket bk booked by others until its tat is c's now plus
// tat (0: a full bucket). opts come after the clock (a fault, say).
func bucketAt(t *testing.T, c clock, bk limiter.Bucket, tat time.Duration, opts ...limitertest.Option) *limitertest.Limiter {
	t.Helper()
	lim := limitertest.New(append([]limitertest.Option{limitertest.WithClock(c.Now), limitertest.WithSleep(c.Sleep)}, opts...)...)
	if tat > 0 {
		// The next token comes τ−T before the tat it leaves.
		next := c.Now().Add(tat - time.Duration(bk.Limit.Tolerance()-bk.Limit.Interval())*time.Microsecond)
		if err := lim.BookAhead(bk, next); err != nil {
			t.Fatalf("booking the bucket ahead: %v", err)
		}
	}
	return lim
}

// reserveAndBatch is what the dispatchers of bucketAt's tests can do
// beyond Reserve: book a batch, and tell a silence they learned; no
// Confirm, Penalize, Multi, Silence nor Ahead, whose paths other tests
// take.
func reserveAndBatch(lim *limitertest.Limiter) Capabilities {
	return Capabilities{Batch: lim.ReserveBatch, KnownSilence: lim.KnownSilence}
}

// reservations is each reservation and batch lim was asked, with the
// burst and the bound it asked within.
func reservations(lim *limitertest.Limiter) []string {
	var out []string
	for _, c := range lim.Calls() {
		switch c.Op {
		case "Reserve":
			out = append(out, fmt.Sprintf("reserve burst %d within %v", c.Limit.Burst, c.MaxDelay))
		case "ReserveBatch":
			out = append(out, fmt.Sprintf("batch of %d, burst %d within %v", c.N, c.Limit.Burst, c.MaxDelay))
		}
	}
	return out
}

// tatOf is bucket bk's tat in lim, as the store would show it.
func tatOf(t *testing.T, lim *limitertest.Limiter, bk limiter.Bucket) time.Time {
	t.Helper()
	s, err := lim.State(t.Context(), bk)
	if err != nil {
		t.Fatal(err)
	}
	return s.TAT
}

// timedPusher records when, after t0, each push went out.
type timedPusher struct {
	clock clock
	t0    time.Time
	at    []time.Duration
}

func (p *timedPusher) Push(context.Context, otapush.Request) (otapush.Response, error) {
	p.at = append(p.at, p.clock.Now().Sub(p.t0))
	return otapush.Response{Attempts: 1}, nil
}

type fixedRoute Route

// bookAll books every group of two or more jobs, as HandleJobs does
// before it starts their jobs.
func bookAll(ctx context.Context, groups map[string]group) {
	for _, g := range groups {
		if len(g.jobs) >= 2 {
			g.book(ctx)
		}
	}
}

func (r fixedRoute) Route(job.Job) (Route, error) { return Route(r), nil }

var (
	// plain is an endpoint's own bucket, 4/s with a burst of 8.
	plain = Route{Bucket: limiter.Bucket{Key: "bk#c#rates", Limit: limiter.PerSecond(4, 8)}, URL: "http://ota.invalid", Header: http.Header{}}
	// normalShare is the normal pushes' route on a meter of 4/s, burst 8,
	// that keeps 4 for urgent ones (see syncer.Route).
	normalShare = Route{Bucket: limiter.Bucket{Key: "bk#c#ari", Limit: limiter.PerSecond(4, 4)}, Horizon: time.Millisecond,
		URL: "http://ota.invalid", Header: http.Header{}}
)

// A lingering job pushes at the moment its bucket fills up, if that comes
// before its linger ends; otherwise, and for a job whose NotBefore is not
// a linger, it waits the linger out.
func TestLingerYieldsToAFillingBucket(t *testing.T) {
	t0 := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name   string
		route  Route
		tat    time.Duration // the bucket's tat, after t0
		linger bool
		// want: when the push went out; the reservations asked for; and
		// the tat left, after t0
		wantAt    time.Duration
		wantCalls string
		wantTAT   time.Duration
	}{
		{"a bucket that fills before the linger ends: push when it fills", plain, 400 * ms, true,
			400 * ms, "[reserve burst 1 within 1s]", 650 * ms},
		{"a bucket full already: push now", plain, 0, true,
			0, "[reserve burst 1 within 1s]", 250 * ms},
		{"a bucket that fills after the linger ends: the linger runs its course", plain, 1500 * ms, true,
			time.Second, "[reserve burst 1 within 1s reserve burst 8 within 15m0s]", 1750 * ms},
		{"a NotBefore that is no linger is waited out", plain, 400 * ms, false,
			time.Second, "[reserve burst 8 within 15m0s]", 1250 * ms},
		// The normal share of a meter with an urgent reserve: the early
		// slot never leaves tat more than the share (4·T) ahead of now.
		{"normal share: fills within (burst−1)·T + horizon", normalShare, 700 * ms, true,
			700 * ms, "[reserve burst 1 within 751ms]", 950 * ms},
		{"normal share: fills later than that: lingers", normalShare, 900 * ms, true,
			time.Second, "[reserve burst 1 within 751ms reserve burst 4 within 1ms]", 1250 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := limitertest.NewClock(t0)
			b := bucketAt(t, c, tt.route.Bucket, tt.tat)
			p := &timedPusher{clock: c, t0: t0}
			d := &worker{&Dispatcher{Limiter: b, Pusher: p, Queue: &fakeQueue{}, Policy: DefaultPolicy, Now: c.Now, Sleep: c.Sleep, Can: reserveAndBatch(b)}, nil, fixedRoute(tt.route)}
			j := testJob(t0)
			j.NotBefore, j.Linger = t0.Add(time.Second), tt.linger
			res, err := d.HandleJob(context.Background(), j)
			if err != nil || res.Outcome != Pushed {
				t.Fatalf("result %+v, err %v; want pushed", res, err)
			}
			if len(p.at) != 1 || p.at[0] != tt.wantAt {
				t.Errorf("pushed at %v, want [%v]", p.at, tt.wantAt)
			}
			if got := fmt.Sprint(reservations(b)); got != tt.wantCalls {
				t.Errorf("reservations %s, want %s", got, tt.wantCalls)
			}
			if got := tatOf(t, b, tt.route.Bucket).Sub(t0); got != tt.wantTAT {
				t.Errorf("tat left at %v, want %v", got, tt.wantTAT)
			}
		})
	}
}

// A batch's lingering jobs on one bucket book with one write: as many as
// fit before their linger ends, at successive slots; the others linger on
// and do not ask again.
func TestLingeringJobsOfABatchBookTogether(t *testing.T) {
	t0 := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name      string
		route     Route
		tat       time.Duration
		wantSlots string // per job: its slot after t0, or "linger"
		wantCalls string
	}{
		{"three of five fit before the linger ends", plain, 300 * ms,
			"[300ms 550ms 800ms linger linger]", "[batch of 5, burst 1 within 1s]"},
		{"none fit: all linger, one write asked", plain, 1200 * ms,
			"[linger linger linger linger linger]", "[batch of 5, burst 1 within 1s]"},
		{"normal share: within (burst−1)·T + horizon only", normalShare, 300 * ms,
			"[300ms 550ms linger linger linger]", "[batch of 5, burst 1 within 751ms]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := limitertest.NewClock(t0)
			b := bucketAt(t, c, tt.route.Bucket, tt.tat)
			d := &worker{&Dispatcher{Limiter: b, Pusher: &timedPusher{clock: c, t0: t0}, Queue: &fakeQueue{}, Policy: DefaultPolicy, Now: c.Now, Sleep: c.Sleep, Can: reserveAndBatch(b)}, nil, fixedRoute(tt.route)}
			jobs := make([]job.Job, 5)
			for i := range jobs {
				jobs[i] = testJob(t0)
				jobs[i].ID = fmt.Sprintf("lane-%d@tok", i)
				jobs[i].NotBefore, jobs[i].Linger = t0.Add(time.Second), true
			}
			tasks := d.tasks(jobs)
			bookAll(context.Background(), d.lingerGroups(b.ReserveBatch, tasks, []int{0, 1, 2, 3, 4}))
			jobs = jobsOf(tasks)
			var got []string
			for _, j := range jobs {
				switch {
				case j.Linger:
					got = append(got, "still asks")
				case j.Hold.At.IsZero() && j.NotBefore.Equal(t0.Add(time.Second)):
					got = append(got, "linger")
				case !j.Hold.At.IsZero() && j.NotBefore.IsZero():
					got = append(got, j.Hold.At.Sub(t0).String())
				default:
					got = append(got, fmt.Sprintf("slot %v not before %v", j.Hold.At, j.NotBefore))
				}
			}
			if fmt.Sprint(got) != tt.wantSlots {
				t.Errorf("jobs %v, want %s", got, tt.wantSlots)
			}
			if got := fmt.Sprint(reservations(b)); got != tt.wantCalls {
				t.Errorf("reservations %s, want %s", got, tt.wantCalls)
			}
		})
	}
}

// A job a booking horizon denies retries after the denial's wait plus a
// point of the next emission interval (Jitter), so jobs denied together
// do not all retry at once for one token.
func TestHorizonDenialsRetrySpread(t *testing.T) {
	t0 := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name    string
		jitter  func(max time.Duration) time.Duration
		wantAt  time.Duration
		wantMax time.Duration
	}{
		// tat 1.2 s on the normal share (4·T = 1 s): the next token can
		// be booked once tat − now ≤ 3·T + 1ms, at 449 ms, for 450 ms.
		{"no jitter: at the wait", func(time.Duration) time.Duration { return 0 }, 450 * ms, 250 * ms},
		{"half the interval later", func(max time.Duration) time.Duration { return max / 2 }, 574 * ms, 250 * ms},
		{"a whole interval later", func(max time.Duration) time.Duration { return max }, 699 * ms, 250 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := limitertest.NewClock(t0)
			b := bucketAt(t, c, normalShare.Bucket, 1200*ms)
			p := &timedPusher{clock: c, t0: t0}
			var asked []time.Duration
			d := &worker{&Dispatcher{Limiter: b, Pusher: p, Queue: &fakeQueue{}, Policy: DefaultPolicy, Now: c.Now, Sleep: c.Sleep, Can: reserveAndBatch(b),
				Jitter: func(max time.Duration) time.Duration { asked = append(asked, max); return tt.jitter(max) }}, nil, fixedRoute(normalShare)}
			res, err := d.HandleJob(context.Background(), testJob(t0))
			if err != nil || res.Outcome != Pushed {
				t.Fatalf("result %+v, err %v; want pushed", res, err)
			}
			if len(p.at) != 1 || p.at[0] != tt.wantAt {
				t.Errorf("pushed at %v, want [%v]", p.at, tt.wantAt)
			}
			if len(asked) != 1 || asked[0] != tt.wantMax {
				t.Errorf("jitter asked for %v, want [%v]", asked, tt.wantMax)
			}
			if got := reservations(b); len(got) != 2 {
				t.Errorf("reservations %v, want the denied one and its retry", got)
			}
		})
	}
}
