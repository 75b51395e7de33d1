package sim

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// A silence a process heard while the limiter's store was out is written
// as soon as the store answers again, though the process's circuit
// breaker is still open: the breaker holds back grants, whose answer (a
// deferral) is the same either way, but a penalty it held back is a
// silence no other worker hears of. Adversary seed 74: a 429's 15 minutes
// answered during a 30 s outage of the store, and after it the fleet sent
// 169 requests inside them. The other process here has no breaker and
// never heard the 429; it must be refused until the silence ends.
func TestPenaltyPassesAnOpenCircuitBreaker(t *testing.T) {
	limit := limiter.PerSecond(5, 4)
	for _, tt := range []struct {
		name     string
		adaptive bool
		record   func(ctx context.Context, l *limiter.Limiter, b limiter.Bucket, until time.Time) error
	}{
		{"Penalize", false, func(ctx context.Context, l *limiter.Limiter, b limiter.Bucket, until time.Time) error {
			return l.Penalize(ctx, b, until)
		}},
		{"Throttle of an adaptive bucket", true, func(ctx context.Context, l *limiter.Limiter, b limiter.Bucket, until time.Time) error {
			return l.Throttle(ctx, b, nil, until)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := memStore(t)
				start := time.Now()
				db.SetOutage(func(now time.Time) bool { return now.Before(start.Add(time.Second)) })
				told, err := limiter.New(db, limiter.WithTable("limits"), limiter.WithCircuitBreaker(1, 10*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				other, err := limiter.New(db, limiter.WithTable("limits"))
				if err != nil {
					t.Fatal(err)
				}
				b := limiter.Bucket{Key: "booking#c0#rates", Limit: limit}
				if tt.adaptive {
					b.Adaptive = &limiter.Adaptive{MinRate: 1, Quiet: 5 * time.Second, Increase: 0.1}
				}
				until := start.Add(15 * time.Minute)
				if err := tt.record(t.Context(), told, b, until); !errors.Is(err, limiter.ErrUnavailable) {
					t.Fatalf("recorded during the outage: %v, want ErrUnavailable", err)
				}
				time.Sleep(2 * time.Second) // the store is back; the breaker is open for 8 s more
				if _, err := told.Take(t.Context(), b, 1); !errors.Is(err, limiter.ErrUnavailable) {
					t.Fatalf("Take with the breaker open: %v, want ErrUnavailable (the test needs the breaker open)", err)
				}
				if err := tt.record(t.Context(), told, b, until); err != nil {
					t.Fatalf("recorded after the store came back, breaker open: %v, want it written", err)
				}
				if r, err := other.Take(t.Context(), b, 1); !errors.Is(err, limiter.ErrExhausted) {
					t.Errorf("another process's Take at +2s: %+v, %v; want a denial until the silence ends", r, err)
				} else if wait, _ := limiter.RetryAfter(err); time.Now().Add(wait).Before(until) {
					t.Errorf("another process's Take at +2s is denied for %v, want at least until the silence ends (%v)", wait, time.Until(until))
				}
				if got, err := other.Silence(t.Context(), b); err != nil || !got.Equal(until) {
					t.Errorf("another process's Silence at +2s = %v, %v; want %v", got, err, until)
				}
			})
		})
	}
}
