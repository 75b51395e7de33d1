package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// capStore is what the script below asks of a learned in-flight cap: the
// table's (*limiter.Limiter) or limitertest's.
type capStore interface {
	InFlightCap(key string) int
	LowerInFlight(ctx context.Context, key string, inFlight int, sent time.Time) error
}

// capScript runs one sequence of lowerings on s, on clock from t0, and
// describes the cap after each step, or its error.
func capScript(t *testing.T, s capStore, clock *limitertest.Clock) []string {
	t.Helper()
	ctx := context.Background()
	t0 := clock.Now()
	const key = "cs#c#ari"
	var out []string
	at := func(d time.Duration) { clock.Set(t0.Add(d)) }
	lower := func(inFlight int, sent time.Duration) {
		if err := s.LowerInFlight(ctx, key, inFlight, t0.Add(sent)); err != nil {
			out = append(out, "error "+err.Error())
			return
		}
		out = append(out, fmt.Sprintf("cap %d", s.InFlightCap(key)))
	}
	look := func() { out = append(out, fmt.Sprintf("cap %d", s.InFlightCap(key))) }
	q := limiter.CapQuiet
	look() // nothing learned
	lower(6, 0)
	at(time.Second)
	lower(2, time.Second)
	at(2 * time.Second)
	lower(5, 0) // sent before the last lowering
	at(time.Second + q)
	look() // climbed by one
	// A throttle while it climbed: a failed raise, the next quiet period
	// doubled.
	lower(2, time.Second+q)
	at(time.Second + 2*q)
	look()
	at(time.Second + 3*q)
	look()
	if err := s.LowerInFlight(ctx, "", 2, clock.Now()); err != nil {
		out = append(out, "error "+err.Error())
	}
	return out
}

// limitertest's learned cap moves as the table's does: the same script on
// the emulator's *limiter.Limiter and on limitertest, step for step.
func TestLimitertestCapsAnswerAsTheTable(t *testing.T) {
	t.Parallel()
	tableClock, memClock := newClock(), newClock()
	table := capScript(t, newWorker(t, emulator.NewTable(t, emulator.DynamoDB(t)), limiter.WithClock(tableClock.Now)).Limiter, tableClock)
	mem := capScript(t, limitertest.New(limitertest.WithClock(memClock.Now)), memClock)
	want := []string{"cap 0", "cap 3", "cap 2", "cap 2", "cap 3", "cap 2", "cap 2", "cap 3", "error invalid bucket.key: empty"}
	if !slices.Equal(table, want) {
		t.Errorf("the table answered\n%q\nwant\n%q", table, want)
	}
	if !slices.Equal(mem, table) {
		t.Errorf("limitertest answered\n%q\nthe table\n%q", mem, table)
	}
}
