package otapush

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
)

// scriptedLimiter answers each Wait with the next scripted error (nil is a
// grant; the last entry repeats) and records the max wait it was given.
type scriptedLimiter struct {
	mu       sync.Mutex
	script   []error
	maxWaits []time.Duration
}

func (s *scriptedLimiter) Wait(_ context.Context, bk limiter.Bucket, n int, maxWait time.Duration) (limiter.Reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.script[min(len(s.maxWaits), len(s.script)-1)]
	s.maxWaits = append(s.maxWaits, maxWait)
	if err != nil {
		return limiter.Reservation{}, err
	}
	return limiter.Reservation{Key: bk.Key, Tokens: n}, nil
}

func (s *scriptedLimiter) Penalize(context.Context, limiter.Bucket, time.Time) error { return nil }

// Contention (every write of the limiter's call lost a race) is retried at
// once after a small jitter, never turned into a deferral for the whole
// budget; a real exhaustion still defers until the slot.
func TestAcquireRetriesContentionPromptly(t *testing.T) {
	contended := limiter.ErrContended
	wrapped := fmt.Errorf("fleetbucket: UpdateItem x3: %w", limiter.ErrContended)
	exhausted := &limiter.ExhaustedError{Key: "k", N: 1, RetryAfter: 3 * time.Second}
	down := errors.New("store unreachable")
	budget := 2 * time.Second
	// Rate 40/s: T = 25ms, so the jitter's ceiling is 25ms; the fake jitter
	// returns the ceiling itself, the longest pause possible.
	bucket := limiter.Bucket{Key: "booking_com#c1#availability", Limit: limiter.PerSecond(40, 40)}
	const pause = 25 * time.Millisecond
	tests := []struct {
		name      string
		script    []error
		wantErr   error // nil: pushed
		wantWaits int
		wantSent  int
		// wantAfter is the deferral's After, exactly (-1: not deferred).
		wantAfter time.Duration
	}{
		{"granted", []error{nil}, nil, 1, 1, -1},
		{"contended once then granted", []error{contended, nil}, nil, 2, 1, -1},
		{"contended twice (wrapped) then granted", []error{wrapped, wrapped, nil}, nil, 3, 1, -1},
		// 2s of budget in 25ms pauses: 80 calls, then back in one pause.
		{"contended for the whole budget defers briefly", []error{contended}, limiter.ErrContended, int(budget / pause), 0, pause},
		{"real exhaustion defers to the slot", []error{exhausted}, limiter.ErrExhausted, 1, 0, 3*time.Second + budget},
		{"contended then exhausted", []error{contended, exhausted}, limiter.ErrExhausted, 2, 0, 3*time.Second + budget - pause},
		{"store down fails closed", []error{down}, down, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := vendor(t, scripted{status: 200})
			lim := &scriptedLimiter{script: tt.script}
			clock := limitertest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
			p := DefaultPolicy
			p.MaxElapsed = budget
			c, err := New(srv.Client(), lim, p, WithClock(clock.Now), WithLogger(slog.New(slog.DiscardHandler)),
				WithJitter(func(ceiling time.Duration) time.Duration { return ceiling }))
			if err != nil {
				t.Fatal(err)
			}
			var slept []time.Duration
			c.sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return clock.Sleep(ctx, d) }
			_, err = c.Push(context.Background(), Request{Bucket: bucket, URL: srv.URL + "/v1/availability", JobID: "job-1",
				Body: []byte(`{}`), Header: http.Header{"Authorization": {"Bearer secret"}}})
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Push = %v, want %v", err, tt.wantErr)
			}
			if len(lim.maxWaits) != tt.wantWaits || *calls != tt.wantSent {
				t.Errorf("%d limiter calls and %d requests, want %d and %d", len(lim.maxWaits), *calls, tt.wantWaits, tt.wantSent)
			}
			for i, d := range slept {
				if d != pause {
					t.Errorf("pause %d was %v, want %v (one emission interval at most)", i, d, pause)
				}
			}
			for i, w := range lim.maxWaits {
				if want := budget - time.Duration(i)*pause; w != want {
					t.Errorf("call %d could wait %v, want what is left of the budget, %v", i, w, want)
				}
			}
			var de *DeferError
			switch {
			case tt.wantAfter < 0 && errors.As(err, &de):
				t.Errorf("deferred: %v", err)
			case tt.wantAfter >= 0 && !errors.As(err, &de):
				t.Errorf("Push = %v, want a *DeferError", err)
			case tt.wantAfter >= 0 && de.After != tt.wantAfter:
				t.Errorf("deferred for %v, want %v", de.After, tt.wantAfter)
			}
			if errors.Is(err, limiter.ErrContended) && errors.Is(err, limiter.ErrExhausted) {
				t.Errorf("contention reported as exhaustion: %v", err)
			}
		})
	}
}

// Contention retries stop when the caller's context does.
func TestAcquireContentionStopsWithContext(t *testing.T) {
	lim := &scriptedLimiter{script: []error{limiter.ErrContended}}
	c, err := New(nil, lim, DefaultPolicy)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.sleep = func(context.Context, time.Duration) error {
		if len(lim.maxWaits) == 3 {
			cancel()
		}
		return ctx.Err()
	}
	_, err = c.Push(ctx, Request{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(1, 1)}, URL: "http://127.0.0.1:1/v1/x", JobID: "j"})
	if !errors.Is(err, context.Canceled) || len(lim.maxWaits) != 3 {
		t.Fatalf("Push = %v after %d limiter calls, want context.Canceled after 3", err, len(lim.maxWaits))
	}
}

func TestNewNilHTTPClientHasATimeout(t *testing.T) {
	c, err := New(nil, &bucketLog{}, DefaultPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if c.http == http.DefaultClient || c.http.Timeout != PushTimeout || PushTimeout <= 0 {
		t.Fatalf("default client %p with timeout %v, want a client of its own with %v", c.http, c.http.Timeout, PushTimeout)
	}
}

// A vendor that never answers cannot hold an attempt past the push's
// budget, whatever http.Client the caller passed (one without a timeout
// included). The 30 s guard only stops a broken build from hanging; the
// budget is 300ms.
func TestAttemptBoundedByBudget(t *testing.T) {
	clients := map[string]func(*httptest.Server) *http.Client{
		"nil (default)":        func(*httptest.Server) *http.Client { return nil },
		"caller's, no timeout": func(s *httptest.Server) *http.Client { return s.Client() },
	}
	for name, hc := range clients {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			var mu sync.Mutex
			arrived := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				arrived++
				mu.Unlock()
				select { // hang: never answer while the test runs
				case <-release:
				case <-r.Context().Done():
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) }) // runs first: lets Close return

			p := DefaultPolicy
			p.MaxElapsed, p.BaseBackoff, p.MaxBackoff = 300*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond
			c, err := New(hc(srv), &bucketLog{}, p, WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := c.Push(context.Background(), Request{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(1, 1)},
					URL: srv.URL + "/v1/availability", JobID: "job-1", Body: []byte(`{}`), Reserved: true})
				done <- err
			}()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Push held an attempt far past its 300ms budget")
			}
			if !errors.Is(err, ErrDefer) || !strings.Contains(err.Error(), "no answer within") {
				t.Fatalf("Push = %v, want a deferral naming the budget", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if arrived == 0 {
				t.Fatal("the vendor saw no request")
			}
		})
	}
}

// The pause after contention is one emission interval at most, within
// [1ms, 50ms].
func TestContendedPauseCeiling(t *testing.T) {
	for _, tt := range []struct {
		rate float64
		want time.Duration
	}{
		{40, 25 * time.Millisecond},
		{20, 50 * time.Millisecond},
		{5, 50 * time.Millisecond}, // T = 200ms: capped
		{1e6, time.Millisecond},    // T = 1µs: floored
		{2e9, time.Millisecond},    // T rounds to 0
		{0, maxContendedJitter},    // not a valid limit; still bounded
	} {
		var ceiling time.Duration
		c, err := New(nil, &bucketLog{}, DefaultPolicy, WithJitter(func(m time.Duration) time.Duration { ceiling = m; return m }))
		if err != nil {
			t.Fatal(err)
		}
		got := c.contendedPause(limiter.Bucket{Key: "k", Limit: limiter.Limit{Rate: tt.rate, Burst: 1}})
		if got != tt.want || ceiling != tt.want {
			t.Errorf("rate %g: pause %v from a ceiling of %v, want %v", tt.rate, got, ceiling, tt.want)
		}
	}
	c, _ := New(nil, &bucketLog{}, DefaultPolicy, WithJitter(func(time.Duration) time.Duration { return 0 }))
	if got := c.contendedPause(limiter.Bucket{Key: "k", Limit: limiter.PerSecond(40, 1)}); got != time.Millisecond {
		t.Errorf("a zero draw paused %v, want the 1ms floor", got)
	}
}
