package integration

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
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
func leaseScript(t *testing.T, s leaseStore, clock *limitertest.Clock) []string {
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
	tableClock, memClock := newClock(), newClock()
	table := leaseScript(t, newWorker(t, emulator.NewTable(t, emulator.DynamoDB(t)), limiter.WithClock(tableClock.Now)).Limiter, tableClock)
	mem := leaseScript(t, limitertest.New(limitertest.WithClock(memClock.Now)), memClock)
	if !slices.Equal(table, want) {
		t.Errorf("the table answered\n%q\nwant\n%q", table, want)
	}
	if !slices.Equal(mem, table) {
		t.Errorf("limitertest answered\n%q\nthe table\n%q", mem, table)
	}
}

// quotaStore is what the script below asks of a limiter with calendar
// quotas: the table's (*limiter.Limiter) or limitertest's.
type quotaStore interface {
	Take(ctx context.Context, b limiter.Bucket, n int) (limiter.Reservation, error)
	TakeQuota(ctx context.Context, q limiter.QuotaBucket, n int, id string) (limiter.QuotaGrant, error)
	TakeWithQuota(ctx context.Context, buckets []limiter.Bucket, q limiter.QuotaBucket, n int, id string) (limiter.MultiReservation, error)
}

// quotaScript runs one sequence of quota calls on s (a bucket of 10/s,
// burst 5, and a quota of 5 a UTC day), on clock from t0 (a day's noon),
// and describes each answer: a grant's slot or what is left of the quota,
// a denial's key and wait.
func quotaScript(t *testing.T, s quotaStore, clock *limitertest.Clock) []string {
	t.Helper()
	ctx := context.Background()
	t0 := clock.Now()
	b := limiter.Bucket{Key: "qs#c#rates", Limit: limiter.PerSecond(10, 5)}
	q := limiter.QuotaBucket{Key: b.Key, Quota: gcra.Quota{Count: 5, Period: gcra.Day}}
	var out []string
	at := func(d time.Duration) { clock.Set(t0.Add(d)) }
	answer := func(what string, err error) {
		var ex *limiter.ExhaustedError
		switch {
		case errors.As(err, &ex):
			what = fmt.Sprintf("denied %s retry %v", ex.Key, ex.RetryAfter)
		case err != nil:
			what = "error " + err.Error()
		}
		out = append(out, what)
	}
	take := func(n int) {
		r, err := s.Take(ctx, b, n)
		answer(fmt.Sprintf("slot %v", r.Slot.Sub(t0)), err)
	}
	quota := func(n int, id string) {
		g, err := s.TakeQuota(ctx, q, n, id)
		answer(fmt.Sprintf("quota left %d reset %v", g.Remaining, g.Reset.Sub(t0)), err)
	}
	both := func(n int, id string) {
		r, err := s.TakeWithQuota(ctx, []limiter.Bucket{b}, q, n, id)
		answer(fmt.Sprintf("both slot %v", r.Slot.Sub(t0)), err)
	}
	quota(1, "a")
	take(3)
	both(3, "b") // the bucket refuses: the quota is not spent
	at(time.Second)
	both(1, "c")
	quota(3, "d") // all that is left: b spent none
	both(1, "e")  // the quota refuses: no token spent
	take(4)
	both(1, "f") // both refuse: the longer wait
	quota(6, "g")
	at(12 * time.Hour)
	both(3, "h")
	return out
}

// limitertest's calendar quotas answer as the table's do, call for call.
func TestLimitertestQuotasAnswerAsTheTable(t *testing.T) {
	t.Parallel()
	tableClock, memClock := newClock(), newClock()
	table := quotaScript(t, newWorker(t, emulator.NewTable(t, emulator.DynamoDB(t)), limiter.WithClock(tableClock.Now)).Limiter, tableClock)
	mem := quotaScript(t, limitertest.New(limitertest.WithClock(memClock.Now)), memClock)
	// A denied quota's wait reaches the reset plus the id's offset in the
	// minute after it: FNV-1a of the id, modulo a minute in µs.
	spread := func(id string) time.Duration {
		h := fnv.New64a()
		h.Write([]byte(id))
		return time.Duration(h.Sum64()%60e6) * time.Microsecond
	}
	want := []string{
		"quota left 4 reset 12h0m0s",
		"slot 0s",
		"denied qs#c#rates retry 100ms",
		"both slot 1s",
		"quota left 0 reset 12h0m0s",
		fmt.Sprintf("denied qs#c#rates\u241fquota retry %v", 12*time.Hour-time.Second+spread("e")),
		"slot 1s",
		fmt.Sprintf("denied qs#c#rates\u241fquota retry %v", 12*time.Hour-time.Second+spread("f")),
		"error invalid n: 6, the quota allows 5 per day",
		"both slot 12h0m0s",
	}
	if !slices.Equal(table, want) {
		t.Errorf("the table answered\n%q\nwant\n%q", table, want)
	}
	if !slices.Equal(mem, table) {
		t.Errorf("limitertest answered\n%q\nthe table\n%q", mem, table)
	}
}
