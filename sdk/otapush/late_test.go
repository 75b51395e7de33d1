package otapush

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
)

// slowGrants is limitertest's limiter whose every grant reaches the push
// later than its decision, by the next of its latencies (the last one
// repeats): a store that answers slowly, as the push sees it. It checks
// nothing itself, so what the push sends is the push's doing.
type slowGrants struct {
	*limitertest.Limiter
	clock     *limitertest.Clock
	latencies []time.Duration
	mu        sync.Mutex
	slots     []time.Time // of every grant, in order
}

func (s *slowGrants) answered(slot time.Time) {
	s.mu.Lock()
	lat := s.latencies[min(len(s.slots), len(s.latencies)-1)]
	s.slots = append(s.slots, slot)
	s.mu.Unlock()
	s.clock.Advance(lat)
}

func (s *slowGrants) Wait(ctx context.Context, b limiter.Bucket, n int, maxWait time.Duration) (limiter.Reservation, error) {
	r, err := s.Limiter.Wait(ctx, b, n, maxWait)
	if err == nil {
		s.answered(r.Slot)
	}
	return r, err
}

func (s *slowGrants) WaitMulti(ctx context.Context, bs []limiter.Bucket, n int, maxWait time.Duration) (limiter.MultiReservation, error) {
	r, err := s.Limiter.WaitMulti(ctx, bs, n, maxWait)
	if err == nil {
		s.answered(r.Slot)
	}
	return r, err
}

// A push never sends on a grant that reaches it later than the margin of
// any of its buckets allows (slot + margin < now): it books again, and
// after limiter.MaxLateGrants late grants in a row defers as for a store
// outage, sending nothing. The buckets are full, so every grant is due at
// once, at the clock's reading when it was asked for; the expected slots
// are worked out by hand from t0 and the latencies.
func TestPushNeverSendsALateGrant(t *testing.T) {
	const ms = time.Millisecond
	main := limiter.Bucket{Key: "ota#cred#availability", Limit: limiter.Limit{Rate: 20, Burst: 40, Margin: 100 * ms}}
	tight := limiter.Bucket{Key: "ota#cred#property", Limit: limiter.Limit{Rate: 20, Burst: 40, Margin: 50 * ms}}
	tests := []struct {
		name      string
		also      []limiter.Bucket
		latencies []time.Duration
		wantSlot  time.Duration // of the grant sent on, after t0
		wantGrant int           // grants booked
		wantDefer bool
	}{
		{name: "at the margin is sent", latencies: []time.Duration{100 * ms}, wantSlot: 0, wantGrant: 1},
		{name: "past the margin is booked again", latencies: []time.Duration{101 * ms, 0}, wantSlot: 101 * ms, wantGrant: 2},
		{name: "every grant late defers", latencies: []time.Duration{150 * ms}, wantGrant: limiter.MaxLateGrants, wantDefer: true},
		{name: "the tightest margin of several buckets binds", also: []limiter.Bucket{tight}, latencies: []time.Duration{80 * ms, 10 * ms}, wantSlot: 80 * ms, wantGrant: 2},
		{name: "within the tightest margin is sent", also: []limiter.Bucket{tight}, latencies: []time.Duration{50 * ms}, wantSlot: 0, wantGrant: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			clock := limitertest.NewClock(t0)
			lim := &slowGrants{Limiter: limitertest.New(limitertest.WithClock(clock.Now), limitertest.WithSleep(clock.Sleep)),
				clock: clock, latencies: tc.latencies}
			var mu sync.Mutex
			var arrivals []time.Time
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				arrivals = append(arrivals, clock.Now())
				mu.Unlock()
			}))
			t.Cleanup(srv.Close)
			c, err := New(srv.Client(), lim, DefaultPolicy, WithClock(clock.Now), WithSleep(clock.Sleep), WithJitter(func(time.Duration) time.Duration { return 0 }),
				WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Push(t.Context(), Request{Bucket: main, Also: tc.also, URL: srv.URL, JobID: "job-1"})
			lim.mu.Lock()
			slots := lim.slots
			lim.mu.Unlock()
			if len(slots) != tc.wantGrant {
				t.Errorf("%d grants booked, want %d", len(slots), tc.wantGrant)
			}
			if tc.wantDefer {
				var later *DeferError
				var late *limiter.LateGrantError
				if !errors.As(err, &later) || !errors.As(err, &late) || !errors.Is(err, limiter.ErrUnavailable) {
					t.Fatalf("Push = %v, want a *DeferError caused by a *limiter.LateGrantError", err)
				}
				if len(arrivals) != 0 {
					t.Errorf("the vendor received %d requests, want none", len(arrivals))
				}
				return
			}
			if err != nil {
				t.Fatalf("Push: %v", err)
			}
			if len(arrivals) != 1 {
				t.Fatalf("the vendor received %d requests, want 1", len(arrivals))
			}
			used := slots[len(slots)-1]
			if got := used.Sub(t0); got != tc.wantSlot {
				t.Errorf("sent on the slot t0 + %v, want t0 + %v", got, tc.wantSlot)
			}
			margin := main.Limit.Margin
			for _, b := range tc.also {
				margin = min(margin, b.Limit.Margin)
			}
			if late := arrivals[0].Sub(used); late > margin {
				t.Errorf("the request arrived %v after its slot, past the margin of %v", late, margin)
			}
		})
	}
}
