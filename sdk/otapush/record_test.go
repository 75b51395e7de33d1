package otapush

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// A 429's silence the store did not take is asked again every 200 ms
// while the store is unavailable, within the push's budget: unrecorded,
// it is a silence no other worker hears of (adversary seed 74: a 429's
// 15 minutes answered during a 30 s outage of the store, and 169
// requests inside them after it). Any other error is not asked again.
func TestThrottleIsRecordedOnceTheStoreAnswers(t *testing.T) {
	down := fmt.Errorf("%w: store down", limiter.ErrUnavailable)
	const budget = 2 * time.Second
	for _, tt := range []struct {
		name      string
		fail      func(n int) error // the nth Penalize's answer
		wantAsks  int
		written   bool
		wantSlept []time.Duration
	}{
		{"written at once", func(int) error { return nil }, 1, true, nil},
		{"store out for three asks: the fourth writes it", func(n int) error {
			if n <= 3 {
				return down
			}
			return nil
		}, 4, true, []time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}},
		// Asks at 0, 0.2 s, … 2 s: the budget ends there.
		{"store out past the push's budget", func(int) error { return down }, 11, false, slices.Repeat([]time.Duration{200 * time.Millisecond}, 10)},
		{"a refusal that is no outage is not asked again", func(int) error { return &limiter.ContendedError{Key: "k", Writes: 3} }, 1, false, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			start := now
			srv, calls := vendor(t, scripted{status: 429, header: map[string]string{"Retry-After": "86400"}})
			bl := &bucketLog{penalizeErr: tt.fail}
			pol := DefaultPolicy
			pol.MaxElapsed = budget
			c, err := New(srv.Client(), bl, pol, WithClock(func() time.Time { return now }), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			var slept []time.Duration
			c.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); now = now.Add(d); return nil }
			_, err = c.Push(context.Background(), Request{
				Bucket: limiter.Bucket{Key: "booking_com#c1#availability", Limit: limiter.PerSecond(5, 5)},
				URL:    srv.URL, JobID: "job-1", Body: []byte(`{}`), Header: http.Header{"Authorization": {"Bearer secret"}}, Reserved: true,
			})
			var de *DeferError
			if !errors.As(err, &de) || !de.Throttled || *calls != 1 {
				t.Fatalf("Push = %v after %d requests, want one request and a throttled deferral", err, *calls)
			}
			if bl.asks != tt.wantAsks || !slices.Equal(slept, tt.wantSlept) {
				t.Errorf("Penalize asked %d times, slept %v; want %d times, slept %v", bl.asks, slept, tt.wantAsks, tt.wantSlept)
			}
			var want []time.Time
			if tt.written {
				want = []time.Time{start.Add(15 * time.Minute)}
			}
			if !slices.Equal(bl.penalties, want) {
				t.Errorf("penalties written %v, want %v", bl.penalties, want)
			}
		})
	}
}
