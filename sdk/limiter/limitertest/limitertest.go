// Package limitertest is an in-memory limiter for unit tests: the methods
// of *limiter.Limiter that callers use (Take, Reserve, ReserveAhead, Wait, ReserveBatch,
// TakeMulti, ReserveMulti, WaitMulti, TakeQuota, TakeWithQuota (quota.go), Penalize, Reset, Silence, KnownSilence, State,
// Confirm, First, the in-flight leases a limiter.LeaseGate takes
// through it (lease.go) and a learned in-flight cap (InFlightCap,
// LowerInFlight: caps.go)) with the
// same arguments, the same decisions and the same typed errors, kept in a
// map in one process instead of a DynamoDB table, on a clock the test
// moves.
//
// Start with New and a clock:
//
//	clock := limitertest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
//	lim := limitertest.New(limitertest.WithClock(clock.Now), limitertest.WithSleep(clock.Sleep))
//
// The decisions are sdk/gcra's, as the real limiter's are, so a test sees
// exactly the grants, slots and retry-afters the fleet would see with one
// worker. What it leaves out is what only a shared store has: contention
// between workers, lost answers, store outages (inject them with
// WithFault), the denial cache and adaptive buckets (refused: their rate
// is learned from the store's answers). A store's latency is WithLatency,
// other workers' bookings BookAhead, and Calls is every call the code
// under test asked.
package limitertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Limiter is an in-memory limiter. It is safe for concurrent use; its
// zero value is not usable: call New.
type Limiter struct {
	mu      sync.Mutex
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
	fault   func(op, key string) error
	latency func(op, key string) time.Duration
	calls   []Call
	buckets map[string]*bucket
	fences  map[string]fence
	leases  map[string]*[limiter.MaxLeases]leaseSlot
	quotas  map[string]gcra.QuotaState     // by limiter.QuotaKey
	caps    map[string]limiter.InFlightCap // by bucket key: the learned in-flight caps (caps.go)
	pushes  map[string]int64               // by lease key, how long the last push released held its lease (µs)
	tags    int                            // FirstAfter's tags and lease owners so far
}

// bucket is what the real limiter keeps in a bucket's item: tat, and the
// booked horizon, the tat the last grant left (which Reset keeps).
type bucket struct{ tat, booked, silence int64 }

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock sets the clock every decision reads (default time.Now).
func WithClock(now func() time.Time) Option { return func(l *Limiter) { l.now = now } }

// WithSleep sets how Wait sleeps until its slot (default: a real sleep
// that ctx cuts short). With a fake clock, pass its Sleep, which moves it.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(l *Limiter) { l.sleep = sleep }
}

// WithFault makes every call ask fault first, with the operation's name
// ("Take", "Reserve", "ReserveAhead", "Wait", "ReserveBatch", "TakeMulti", "ReserveMulti",
// "TakeQuota", "TakeWithQuota", "Penalize", "Reset", "Silence", "State", "Confirm", "First",
// "AcquireLease", "ReleaseLease", "HandOverLease", "Leases", "LowerInFlight") and the
// bucket's (or lease set's) key (each bucket's in turn for a multi-bucket call): a non-nil
// error is the call's answer, and nothing changes. An error that wraps
// limiter.ErrUnavailable, as fmt.Errorf("%w: store down",
// limiter.ErrUnavailable) does, is an outage to the code under test.
func WithFault(fault func(op, key string) error) Option { return func(l *Limiter) { l.fault = fault } }

// New returns an empty limiter: every bucket starts full.
func New(opts ...Option) *Limiter {
	l := &Limiter{now: time.Now, sleep: ctxsleep.Sleep, buckets: map[string]*bucket{}, fences: map[string]fence{},
		leases: map[string]*[limiter.MaxLeases]leaseSlot{}, quotas: map[string]gcra.QuotaState{}, caps: map[string]limiter.InFlightCap{}, pushes: map[string]int64{}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// check records a call of n tokens of b within maxDelay and is what it
// refuses before it decides: a fault, an invalid bucket, an adaptive one.
func (l *Limiter) check(op string, b limiter.Bucket, n int, maxDelay time.Duration) error {
	if err := l.ask(Call{Op: op, Key: b.Key, N: n, Limit: b.Limit, MaxDelay: maxDelay}); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	if b.Adaptive != nil {
		return &limiter.ArgumentError{Field: "bucket.adaptive", Reason: "limitertest has no adaptive buckets: their rate is learned from a shared store"}
	}
	return nil
}

func (l *Limiter) state(key string) *bucket {
	s, ok := l.buckets[key]
	if !ok {
		s = &bucket{}
		l.buckets[key] = s
	}
	return s
}

// Take grants n tokens now, or fails with an *limiter.ExhaustedError
// carrying the exact wait; n beyond what the bucket holds fails with
// limiter.ErrNeverGrantable.
func (l *Limiter) Take(ctx context.Context, b limiter.Bucket, n int) (limiter.Reservation, error) {
	return l.reserve(ctx, "Take", b, n, 0)
}

// Reserve books n tokens at the earliest slot no later than maxDelay from
// now, or fails with the wait until the same reservation would fit.
func (l *Limiter) Reserve(ctx context.Context, b limiter.Bucket, n int, maxDelay time.Duration) (limiter.Reservation, error) {
	return l.reserve(ctx, "Reserve", b, n, maxDelay)
}

func (l *Limiter) reserve(ctx context.Context, op string, b limiter.Bucket, n int, maxDelay time.Duration) (limiter.Reservation, error) {
	defer l.answer(ctx, op, b.Key)
	if err := l.check(op, b, n, maxDelay); err != nil {
		return limiter.Reservation{}, err
	}
	if err := gcra.Check(b.Limit, n, maxDelay.Microseconds()); err != nil {
		return limiter.Reservation{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.book(b, n, maxDelay.Microseconds())
}

// book decides a request for n tokens within delay µs and applies it.
func (l *Limiter) book(b limiter.Bucket, n int, delay int64) (limiter.Reservation, error) {
	return l.bookAt(b, n, delay, l.now().UnixMicro())
}

// bookAt is book deciding at now (µs), the time a write claims.
func (l *Limiter) bookAt(b limiter.Bucket, n int, delay, now int64) (limiter.Reservation, error) {
	s := l.state(b.Key)
	d := gcra.Decide(s.tat, now, b.Limit, n, delay)
	if !d.Allowed {
		return limiter.Reservation{}, &limiter.ExhaustedError{Key: b.Key, N: n, RetryAfter: micros(d.RetryAfter)}
	}
	s.tat, s.booked = d.TAT, d.TAT
	return limiter.Reservation{Key: b.Key, Tokens: n, Slot: time.UnixMicro(d.Slot), Remaining: d.Remaining, Rate: b.Limit.Rate}, nil
}

// ReserveAhead is Reserve deciding at the time ahead from now (at most
// maxDelay, of which it takes its share), as a write claiming that time
// would: every slot it grants lies at least that far ahead.
func (l *Limiter) ReserveAhead(ctx context.Context, b limiter.Bucket, n int, maxDelay, ahead time.Duration) (limiter.Reservation, error) {
	defer l.answer(ctx, "ReserveAhead", b.Key)
	if err := l.check("ReserveAhead", b, n, maxDelay); err != nil {
		return limiter.Reservation{}, err
	}
	ahead = min(max(ahead, 0), max(maxDelay, 0))
	if err := gcra.Check(b.Limit, n, (maxDelay - ahead).Microseconds()); err != nil {
		return limiter.Reservation{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bookAt(b, n, (maxDelay - ahead).Microseconds(), l.now().Add(ahead).UnixMicro())
}

// Wait reserves n tokens and sleeps until their slot. It fails at once,
// without sleeping, when the slot lies past maxWait or past ctx's
// deadline. If ctx ends during the sleep the tokens stay spent and ctx's
// error is returned.
func (l *Limiter) Wait(ctx context.Context, b limiter.Bucket, n int, maxWait time.Duration) (limiter.Reservation, error) {
	if err := l.check("Wait", b, n, maxWait); err != nil {
		l.answer(ctx, "Wait", b.Key)
		return limiter.Reservation{}, err
	}
	if err := gcra.Check(b.Limit, n, maxWait.Microseconds()); err != nil {
		return limiter.Reservation{}, err
	}
	bound, err := l.waitBound(ctx, maxWait)
	if err != nil {
		return limiter.Reservation{}, err
	}
	l.mu.Lock()
	r, err := l.book(b, n, bound.Microseconds())
	l.mu.Unlock()
	l.answer(ctx, "Wait", b.Key)
	if err != nil {
		return limiter.Reservation{}, err
	}
	if err := l.sleepUntil(ctx, r.Slot); err != nil {
		return limiter.Reservation{}, err
	}
	return r, nil
}

// waitBound is the longest a wait may book ahead: maxWait, or less if
// ctx's deadline comes first; a deadline already passed is an error.
func (l *Limiter) waitBound(ctx context.Context, maxWait time.Duration) (time.Duration, error) {
	bound := maxWait
	if deadline, ok := ctx.Deadline(); ok {
		bound = min(bound, deadline.Sub(l.now()))
	}
	if bound < 0 {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return 0, context.DeadlineExceeded
	}
	return bound, nil
}

// sleepUntil sleeps until slot by the limiter's clock; the tokens stay
// spent if ctx ends first.
func (l *Limiter) sleepUntil(ctx context.Context, slot time.Time) error {
	if d := slot.Sub(l.now()); d > 0 {
		return l.sleep(ctx, d)
	}
	return nil
}

// ReserveBatch books up to req.N slots one emission interval apart, as
// one write would: all N or a denial with the exact wait, or with Partial
// as many as fit within req.MaxDelay; req.Ahead as ReserveAhead's ahead.
func (l *Limiter) ReserveBatch(ctx context.Context, b limiter.Bucket, req limiter.BatchRequest) (limiter.Batch, error) {
	defer l.answer(ctx, "ReserveBatch", b.Key)
	if err := l.check("ReserveBatch", b, req.N, req.MaxDelay); err != nil {
		return limiter.Batch{}, err
	}
	ahead := min(max(req.Ahead, 0), max(req.MaxDelay, 0))
	delay := (req.MaxDelay - ahead).Microseconds()
	switch {
	case req.N < 1:
		return limiter.Batch{}, &limiter.ArgumentError{Field: "n", Reason: fmt.Sprintf("%d, want ≥ 1", req.N)}
	case req.N > limiter.MaxBatch:
		return limiter.Batch{}, &limiter.ArgumentError{Field: "n", Reason: fmt.Sprintf("%d, want at most %d (limiter.MaxBatch)", req.N, limiter.MaxBatch)}
	case req.MaxDelay < 0:
		return limiter.Batch{}, &limiter.ArgumentError{Field: "maxDelay", Reason: fmt.Sprintf("%v, want ≥ 0", req.MaxDelay)}
	}
	first := req.N
	if req.Partial {
		first = 1
	}
	if err := gcra.Check(b.Limit, first, delay); err != nil {
		return limiter.Batch{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now().Add(ahead).UnixMicro()
	s := l.state(b.Key)
	n := req.N
	if req.Partial {
		// At least one, so a full bucket answers with the wait for its
		// next slot.
		n = max(gcra.Fit(s.tat, now, b.Limit, req.N, delay), 1)
	}
	r, err := l.bookAt(b, n, delay, now)
	if err != nil {
		return limiter.Batch{}, err
	}
	out := limiter.Batch{Key: b.Key, Requested: req.N}
	for _, slot := range gcra.Slots(s.tat, now, b.Limit, r.Tokens) {
		out.Slots = append(out.Slots, time.UnixMicro(slot))
	}
	return out, nil
}

// TakeMulti takes n tokens now from every bucket, or from none.
func (l *Limiter) TakeMulti(ctx context.Context, buckets []limiter.Bucket, n int) (limiter.MultiReservation, error) {
	return l.reserveMulti(ctx, "TakeMulti", buckets, n, 0, 0)
}

// ReserveMulti books n tokens of every bucket at their common slot within
// maxDelay, or none.
func (l *Limiter) ReserveMulti(ctx context.Context, buckets []limiter.Bucket, n int, maxDelay time.Duration) (limiter.MultiReservation, error) {
	return l.reserveMulti(ctx, "ReserveMulti", buckets, n, maxDelay, maxDelay)
}

// WaitMulti reserves n tokens of every bucket and sleeps until their
// common slot; it fails at once, like Wait, when the slot lies past
// maxWait or ctx's deadline.
func (l *Limiter) WaitMulti(ctx context.Context, buckets []limiter.Bucket, n int, maxWait time.Duration) (limiter.MultiReservation, error) {
	if err := limiter.CheckMulti(buckets, n, maxWait); err != nil {
		return limiter.MultiReservation{}, err
	}
	bound, err := l.waitBound(ctx, maxWait)
	if err != nil {
		return limiter.MultiReservation{}, err
	}
	r, err := l.reserveMulti(ctx, "WaitMulti", buckets, n, maxWait, bound)
	if err != nil {
		return limiter.MultiReservation{}, err
	}
	return r, l.sleepUntil(ctx, r.Slot)
}

// reserveMulti books n tokens of every bucket within maxDelay, a call
// that asked within asked (a wait's maxWait, cut to its deadline).
func (l *Limiter) reserveMulti(ctx context.Context, op string, buckets []limiter.Bucket, n int, asked, maxDelay time.Duration) (limiter.MultiReservation, error) {
	if len(buckets) > 0 {
		defer l.answer(ctx, op, buckets[0].Key)
	}
	for _, b := range buckets {
		if err := l.check(op, b, n, asked); err != nil {
			return limiter.MultiReservation{}, err
		}
	}
	if err := limiter.CheckMulti(buckets, n, maxDelay); err != nil {
		return limiter.MultiReservation{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now().UnixMicro()
	tats, limits, keys := make([]int64, len(buckets)), make([]gcra.Limit, len(buckets)), make([]string, len(buckets))
	for i, b := range buckets {
		tats[i], limits[i], keys[i] = l.state(b.Key).tat, b.Limit, b.Key
	}
	d := gcra.DecideMulti(tats, now, limits, n, maxDelay.Microseconds())
	if !d.Allowed {
		return limiter.MultiReservation{}, &limiter.ExhaustedError{Key: keys[d.Binding], N: n, RetryAfter: micros(d.RetryAfter)}
	}
	for i, k := range keys {
		// Every bucket is charged at the common slot, as the Limiter does.
		s := l.state(k)
		s.tat = max(s.tat, d.Slot) + int64(n)*limits[i].Interval()
		s.booked = s.tat
	}
	return limiter.MultiReservation{Keys: keys, Tokens: n, Slot: time.UnixMicro(d.Slot), Binding: keys[d.Binding]}, nil
}

// Penalize empties bucket b until `until`: nothing is granted before it,
// and the burst refills gradually after it. A bucket already emptied past
// that is left alone; until more than limiter.MaxPenalty ahead is refused
// with an *limiter.ArgumentError on "until".
func (l *Limiter) Penalize(ctx context.Context, b limiter.Bucket, until time.Time) error {
	defer l.answer(ctx, "Penalize", b.Key)
	if err := l.check("Penalize", b, 0, 0); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ahead := until.Sub(l.now()); ahead > limiter.MaxPenalty {
		return &limiter.ArgumentError{Field: "until", Reason: fmt.Sprintf("%v after now, want at most %v (limiter.MaxPenalty)", ahead, limiter.MaxPenalty)}
	}
	s := l.state(b.Key)
	s.tat = max(s.tat, gcra.Penalty(until.UnixMicro(), b.Limit))
	s.silence = max(s.silence, until.UnixMicro())
	return nil
}

// Silence is the end of the silence a Penalize asked of bucket b, if now
// lies inside it, and the zero time otherwise.
func (l *Limiter) Silence(ctx context.Context, b limiter.Bucket) (time.Time, error) {
	defer l.answer(ctx, "Silence", b.Key)
	if err := l.check("Silence", b, 0, 0); err != nil {
		return time.Time{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.state(b.Key); s.silence > l.now().UnixMicro() {
		return time.UnixMicro(s.silence), nil
	}
	return time.Time{}, nil
}

// KnownSilence is Silence with no call, as a process that learned every
// Penalize answers while its store is unreachable: no fault is asked.
func (l *Limiter) KnownSilence(b limiter.Bucket) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.state(b.Key); s.silence > l.now().UnixMicro() {
		return time.UnixMicro(s.silence)
	}
	return time.Time{}
}

// Reset drops every penalty of bucket b but keeps the slots already
// handed out: tat falls back to the booked horizon, never below.
func (l *Limiter) Reset(ctx context.Context, b limiter.Bucket) error {
	defer l.answer(ctx, "Reset", b.Key)
	if err := l.check("Reset", b, 0, 0); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(b.Key)
	s.tat, s.silence = s.booked, 0
	return nil
}

// BookAhead books bucket b as other workers would have: its next token is
// granted no earlier than next, and each token after it one emission
// interval later. A bucket booked past next already is left alone. It is
// a test's setup, not a call: no fault is asked, nothing is recorded.
func (l *Limiter) BookAhead(b limiter.Bucket, next time.Time) error {
	if err := b.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// A grant of one token is slotted at tat + T − τ (gcra.Decide).
	s := l.state(b.Key)
	s.tat = max(s.tat, next.UnixMicro()+b.Limit.Tolerance()-b.Limit.Interval())
	s.booked = max(s.booked, s.tat)
	return nil
}

// State is bucket b as an operator sees it.
func (l *Limiter) State(ctx context.Context, b limiter.Bucket) (limiter.State, error) {
	defer l.answer(ctx, "State", b.Key)
	if err := l.check("State", b, 0, 0); err != nil {
		return limiter.State{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	s := l.state(b.Key)
	out := limiter.State{Key: b.Key, Tokens: gcra.Remaining(s.tat, now.UnixMicro(), b.Limit), Rate: b.Limit.Rate}
	if s.tat > 0 {
		out.TAT = time.UnixMicro(s.tat)
		out.FullAfter = max(out.TAT.Sub(now), 0)
	}
	return out, nil
}

// Confirm reports that a slot still stands. Only an adaptive bucket's
// throttle revokes slots, and limitertest has none, so it is always true.
func (l *Limiter) Confirm(ctx context.Context, b limiter.Bucket, s limiter.Stamp) (bool, error) {
	defer l.answer(ctx, "Confirm", b.Key)
	if err := l.check("Confirm", b, 0, 0); err != nil {
		return false, err
	}
	return true, nil
}

// First reports whether this is the first call for key before until:
// true once, false for every other call until then.
func (l *Limiter) First(ctx context.Context, key string, until time.Time) (bool, error) {
	first, _, err := l.FirstAfter(ctx, key, nil, until)
	return first, err
}

// FirstAfter is First for a caller that asked before: a fence one of the
// earlier tags holds is taken over under a new tag, as the limiter's
// FirstAfter does. An injected fault stands for a write never sent, so it
// hands back no tag.
func (l *Limiter) FirstAfter(ctx context.Context, key string, earlier []string, until time.Time) (bool, string, error) {
	defer l.answer(ctx, "First", key)
	if err := l.ask(Call{Op: "First", Key: key}); err != nil {
		return false, "", err
	}
	if key == "" {
		return false, "", &limiter.ArgumentError{Field: "key", Reason: "empty"}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tags++
	me := fmt.Sprintf("t%d", l.tags)
	if f, seen := l.fences[key]; seen && l.now().Before(f.until) && !slices.Contains(earlier, f.who) {
		return false, me, nil
	}
	l.fences[key] = fence{until: until, who: me}
	return true, me, nil
}

// fence is a key's fence: until when, and the tag of the call that holds it.
type fence struct {
	until time.Time
	who   string
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
