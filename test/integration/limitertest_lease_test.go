package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// leaseStore is what the script below asks of a lease store: the table's
// (*limiter.Limiter) or limitertest's.
type leaseStore interface {
	limiter.LeaseStore
	Leases(ctx context.Context, key string) ([]limiter.Lease, error)
}

// leaseScript runs one sequence of lease calls on s, on clock from t0, and
// describes each answer with what does not depend on which free slot the
// store picked (the table picks at random): an acquire's expiry, a busy
// set's held count and wait, a release's error.
func leaseScript(t *testing.T, s leaseStore, clock *manualClock) []string {
	t.Helper()
	ctx := context.Background()
	t0 := clock.Now()
	f := limiter.InFlight{Key: "sm#c#ari", Max: 2, Hold: 10 * time.Second, Timeout: 4 * time.Second}
	lowered := f
	lowered.Max = 1
	var out []string
	at := func(d time.Duration) { clock.Set(t0.Add(d)) }
	acquire := func(f limiter.InFlight) limiter.Lease {
		l, err := s.AcquireLease(ctx, f)
		out = append(out, describe(l, err, t0))
		return l
	}
	release := func(l limiter.Lease) {
		out = append(out, describe(limiter.Lease{}, s.ReleaseLease(ctx, l), t0))
	}
	handOver := func(l limiter.Lease, f limiter.InFlight) limiter.Lease {
		next, err := s.HandOverLease(ctx, l, f)
		out = append(out, describe(next, err, t0))
		return next
	}
	a := acquire(f)
	at(time.Second)
	b := acquire(f)
	at(2 * time.Second)
	acquire(f) // both held: ask again within one push's time
	at(3 * time.Second)
	release(a)
	release(a) // found free already
	acquire(f)
	at(12 * time.Second) // b expired at 11 s
	d := acquire(f)
	release(b) // taken since
	acquire(lowered)
	handOver(d, lowered) // a slot at or above the lowered max is live
	handOver(d, f)
	release(d) // handed over: no longer d's
	live, err := s.Leases(ctx, f.Key)
	out = append(out, fmt.Sprintf("live %d %v", len(live), err))
	at(40 * time.Second)
	acquire(lowered) // every lease expired: the lowered max is a bound again
	at(41 * time.Second)
	acquire(f)
	at(42 * time.Second)
	acquire(f) // both held: ask when the first push likely ends (a's took 3 s)
	return out
}

// describe is an answer without the slot and owner the store chose.
func describe(l limiter.Lease, err error, t0 time.Time) string {
	var busy *limiter.LeaseBusyError
	switch {
	case errors.As(err, &busy):
		return fmt.Sprintf("busy held %d retry %v", busy.Held, busy.RetryAfter)
	case errors.Is(err, limiter.ErrLeaseLost):
		return "lost"
	case err != nil:
		return "error " + err.Error()
	case l.Key == "":
		return "ok"
	}
	return fmt.Sprintf("lease %v–%v", l.Acquired.Sub(t0), l.Expires.Sub(t0))
}

// limitertest's leases answer as the table's do: the same script on the
// emulator's *limiter.Limiter and on limitertest, call for call.
func TestLimitertestLeasesAnswerAsTheTable(t *testing.T) {
	t.Parallel()
	want := []string{
		"lease 0s–10s",
		"lease 1s–11s",
		"busy held 2 retry 4s",
		"ok",
		"ok",
		"lease 3s–13s",
		"lease 12s–22s",
		"lost",
		"busy held 2 retry 4s",
		"lost",
		"lease 12s–22s",
		"lost",
		"live 2 <nil>",
		"lease 40s–50s",
		"lease 41s–51s",
		"busy held 2 retry 1s",
	}
	tableClock, memClock := newManualClock(), newManualClock()
	table := leaseScript(t, newWorker(t, emulator.NewTable(t, emulator.DynamoDB(t)), limiter.WithClock(tableClock.Now)).Limiter, tableClock)
	mem := leaseScript(t, limitertest.New(limitertest.WithClock(memClock.Now)), memClock)
	if !slices.Equal(table, want) {
		t.Errorf("the table answered\n%q\nwant\n%q", table, want)
	}
	if !slices.Equal(mem, table) {
		t.Errorf("limitertest answered\n%q\nthe table\n%q", mem, table)
	}
}
