package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
)

// Rates (normal) and availability (urgent) share one meter with 4 of its
// burst of 8 kept for urgent pushes: however many normal pushes contend,
// they take at most 4 tokens at an instant, and 4 urgent ones then find a
// token at once; normal pushes that fail and retry, or that the vendor
// throttles, leave the reserve as it was. A fixed clock makes the
// bucket's arithmetic exact.
func TestUrgentPushesFindTheirReserve(t *testing.T) {
	t.Parallel()
	r := newMeterRig(t, limiter.PerSecond(1000, 1000), 4)
	normal, urgent := r.normal, r.urgent
	if normal.Bucket.Key != urgent.Bucket.Key || normal.Bucket.Key != "bk#c1#ari" {
		t.Fatalf("bucket keys %q and %q, want both bk#c1#ari", normal.Bucket.Key, urgent.Bucket.Key)
	}
	if normal.Bucket.Limit.Burst != 4 || urgent.Bucket.Limit.Burst != 8 || normal.Horizon <= 0 || urgent.Horizon != 0 || normal.Reserve != 4 || urgent.Reserve != 0 {
		t.Fatalf("normal burst %d horizon %v reserve %d, urgent burst %d horizon %v reserve %d; want 4 with a horizon and the reserve, and 8 without",
			normal.Bucket.Limit.Burst, normal.Horizon, normal.Reserve, urgent.Bucket.Limit.Burst, urgent.Horizon, urgent.Reserve)
	}

	// A lingering normal lane books as the dispatcher's lingerSlot does:
	// one token of the bucket taken with burst 1, at most (4−1)·T plus the
	// horizon ahead, so its slots queue while tat stays within the share.
	lingering := normal
	lingering.Bucket.Limit.Burst = 1
	lingerReach := 3*250*time.Millisecond + normal.Horizon

	t0 := r.clock.Now()
	ctx := context.Background()
	take := func(route dispatch.Route, maxDelay time.Duration) (slots []time.Duration) {
		for range 20 {
			res, err := r.lim.Reserve(ctx, route.Bucket, 1, maxDelay)
			if _, denied := limiter.RetryAfter(err); denied {
				return slots
			}
			if err != nil {
				t.Fatal(err)
			}
			slots = append(slots, res.Slot.Sub(t0))
		}
		return slots
	}
	// push sends normal jobs through the dispatcher and otapush, each
	// answered with the given failures before it is accepted.
	push := func(n int, failures ...int) func() []time.Duration {
		return func() []time.Duration {
			for i := range n {
				id := fmt.Sprintf("rates-%v-%d", r.clock.Now().Sub(t0), i)
				for _, status := range failures {
					r.ota.FailNext(id, status, 1)
				}
				res, err := r.d.HandleJob(ctx, r.job("rates", id))
				if err != nil || res.Outcome != dispatch.Pushed || res.Attempts != 1+len(failures) {
					t.Fatalf("normal push %s: %+v, %v; want pushed on attempt %d", id, res, err, 1+len(failures))
				}
			}
			return nil
		}
	}
	// sentAfter is when the vendor saw the requests sent since the last
	// step that set the clock.
	var stepAt time.Time
	sentAfter := func() []time.Duration {
		var out []time.Duration
		for _, req := range r.ota.Requests() {
			if !req.At.Before(stepAt) {
				out = append(out, req.At.Sub(stepAt))
			}
		}
		return out
	}
	tests := []struct {
		name string
		at   time.Duration
		do   func() []time.Duration
		want string // the slots granted, after t0 (or what the step reports)
	}{
		{"a normal backlog takes all but the reserve", 0, func() []time.Duration { return take(normal, normal.Horizon) }, "[0s 0s 0s 0s]"},
		{"urgent pushes find the reserve at once, then queue", 0, func() []time.Duration { return take(urgent, 2*time.Second) }, "[0s 0s 0s 0s 250ms 500ms 750ms 1s 1.25s 1.5s 1.75s 2s]"},
		{"normal ones wait until the bucket is back below their share", 2 * time.Second, func() []time.Duration { return take(normal, normal.Horizon) }, "[]"},
		{"and then take the rate", 3250 * time.Millisecond, func() []time.Duration { return take(normal, normal.Horizon) }, "[3.25s]"},
		{"lingering normal lanes book their share, one interval apart", 10 * time.Second, func() []time.Duration { return take(lingering, lingerReach) }, "[10s 10.25s 10.5s 10.75s]"},
		{"and urgent pushes still find the reserve at once", 10 * time.Second, func() []time.Duration { return take(urgent, 0) }, "[10s 10s 10s 10s]"},
		// 4 normal pushes that fail twice each: their 8 retries wait for
		// free tokens of the share instead of booking past it.
		{"normal pushes retry within their share", 20 * time.Second, push(4, 503, 500), "[]"},
		// Their 12 requests took the share's 4 at once and 8 more at the
		// rate (2 s): urgent pushes then find all 4 of the reserve.
		{"so urgent pushes find the reserve at once after them", 0, func() []time.Duration { return take(urgent, 0) }, "[22s 22s 22s 22s]"},
		// A throttled normal push empties the whole meter until the
		// vendor's Retry-After (2 s, the default), and the burst refills
		// after it: its retry waits until the meter has the reserve and
		// one more token free, 2 s + 5·T later.
		{"a throttled normal push retries after Retry-After and a token", 30 * time.Second, push(1, 429), "[]"},
		{"the vendor saw the retry 3.25 s after the 429", 0, sentAfter, "[0s 3.25s]"},
		{"and urgent pushes find the reserve whole after it", 0, func() []time.Duration { return take(urgent, 0) }, "[33.25s 33.25s 33.25s 33.25s]"},
	}
	for _, tt := range tests {
		if tt.at > 0 {
			r.clock.Set(t0.Add(tt.at))
			stepAt = r.clock.Now()
		}
		if got := fmt.Sprint(tt.do()); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
