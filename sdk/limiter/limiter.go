package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// DefaultTable is the table name used unless WithTable says otherwise.
const DefaultTable = "fleetbucket"

// maxKeyBytes is DynamoDB's limit on a partition key value.
const maxKeyBytes = 2048

// Limit is a bucket's rate (tokens per second) and burst; see gcra.Limit.
type Limit = gcra.Limit

// PerSecond returns a limit of rate tokens per second with the given burst.
func PerSecond(rate float64, burst int) Limit { return gcra.PerSecond(rate, burst) }

// PerMinute returns a limit of n tokens per minute with the given burst.
func PerMinute(n float64, burst int) Limit { return gcra.PerMinute(n, burst) }

// Bucket names a shared bucket and the limit to apply to it on this call.
type Bucket struct {
	// Key identifies the bucket across the fleet, e.g. "booking_com#cred-42#availability".
	Key   string
	Limit Limit
	// Adaptive, if set, makes the bucket learn the vendor's real limit:
	// Limit is then the most it grants, and Throttle and Publish move its
	// effective rate for the whole fleet (see Adaptive buckets in the
	// package documentation). Every worker of a bucket must pass the same
	// Adaptive, as the same Limit. Single-bucket calls only: TakeMulti and
	// ReserveMulti refuse an adaptive bucket among several.
	Adaptive *Adaptive
}

// Validate reports what is wrong with b as an *ArgumentError naming the field.
func (b Bucket) Validate() error {
	switch {
	case b.Key == "":
		return &ArgumentError{Field: "bucket.key", Reason: "empty"}
	case len(b.Key) > maxKeyBytes:
		return &ArgumentError{Field: "bucket.key", Reason: fmt.Sprintf("%d bytes, DynamoDB allows at most %d", len(b.Key), maxKeyBytes)}
	case !utf8.ValidString(b.Key):
		return &ArgumentError{Field: "bucket.key", Reason: "not valid UTF-8, which DynamoDB refuses"}
	}
	if err := checkShardSeparator(b.Key); err != nil {
		return err
	}
	if err := b.Limit.Validate(); err != nil {
		return err
	}
	if b.Adaptive != nil {
		return b.Adaptive.Validate(b.Limit)
	}
	return nil
}

// Reservation is a grant: Tokens tokens of bucket Key, to be spent no
// earlier than Slot.
type Reservation struct {
	Key    string
	Tokens int
	// Slot is when the tokens may be spent: the call's own now for a Take,
	// up to its max delay later for a Reserve.
	Slot time.Time
	// Remaining is the number of whole tokens left in the bucket right after
	// this grant, as this process saw it.
	Remaining int
	// Rate is the effective rate (tokens/s) the grant was made at: the
	// limit's rate, or less for an adaptive bucket that learned a lower one.
	Rate float64

	adaptive bool  // granted by an adaptive bucket's write
	version  int64 // the adaptive state's version that write conditioned on
	interval int64 // the effective emission interval (µs) it was granted at
	probing  bool  // granted above the adaptive state's Base (see Probing)
}

// Delay is how long after now the reservation's slot falls (0 if it has
// passed).
func (r Reservation) Delay(now time.Time) time.Duration { return max(r.Slot.Sub(now), 0) }

// State is a bucket as an operator sees it.
type State struct {
	Key string
	// TAT is the stored theoretical arrival time; zero for a bucket with no
	// item (full).
	TAT time.Time
	// Tokens is the number of whole tokens available now.
	Tokens int
	// FullAfter is how long until the bucket is full again.
	FullAfter time.Duration
	// Rate is the effective rate now (tokens/s), and Adapt the adaptive
	// state it comes from (zero for a bucket that never adapted).
	Rate  float64
	Adapt AdaptState
}

// Limiter grants tokens from buckets in one DynamoDB table. It is safe for
// concurrent use; one per process is enough.
type Limiter struct {
	db             DynamoDBAPI
	table          string
	now            func() time.Time
	attempts       int
	attemptTimeout time.Duration
	cacheAge       time.Duration
	seen           seenTAT
	adapt          seenAdapt
	breaker        *breaker.Breaker // nil: always call the store
	optErr         error
}

// DefaultAttemptTimeout is how long one store call may take before the
// limiter gives up on its answer, unless WithAttemptTimeout says otherwise.
const DefaultAttemptTimeout = 5 * time.Second

// DefaultDenialCacheAge is how long a tat this process saw answers denials
// with no call, unless WithDenialCacheAge says otherwise; it bounds how long
// an item an operator deleted takes to reach a warm worker, and how much
// later than a Reset a short denial may send its caller back.
const DefaultDenialCacheAge = time.Second

// MaxPenalty is how far ahead of now Penalize accepts `until`.
const MaxPenalty = 24 * time.Hour

// Option configures a Limiter.
type Option func(*Limiter)

// WithTable sets the DynamoDB table (default DefaultTable).
func WithTable(name string) Option { return func(l *Limiter) { l.table = name } }

// WithClock replaces time.Now, for tests and simulations.
func WithClock(now func() time.Time) Option { return func(l *Limiter) { l.now = now } }

// WithMaxAttempts bounds the store calls one call may send (default 3). Two
// always decide unless the item is reset or deleted between them; the third
// is for that, for a lost answer or a conflicting transaction.
func WithMaxAttempts(n int) Option { return func(l *Limiter) { l.attempts = n } }

// WithAttemptTimeout bounds each store call (default DefaultAttemptTimeout),
// whatever the caller's context allows: a store that hangs costs a call at
// most this per attempt, fails with ErrUnavailable (wrapping an
// *AttemptTimeoutError) and counts as a store failure for the circuit
// breaker. d must be > 0.
func WithAttemptTimeout(d time.Duration) Option { return func(l *Limiter) { l.attemptTimeout = d } }

// WithDenialCacheAge sets how long a tat this process saw at the booked
// horizon may answer a denial with no store call (default
// DefaultDenialCacheAge); denials for no longer than d are answered
// locally too. A denial predicted from an older observation, or from a
// penalty (which a Reset may have dropped), is confirmed by a write first,
// so a Reset reaches every warm worker on its next call, and an operator
// deleting the item within d. 0 confirms every denial with a write. d must
// be ≥ 0.
func WithDenialCacheAge(d time.Duration) Option { return func(l *Limiter) { l.cacheAge = d } }

// WithCircuitBreaker stops calling DynamoDB for cooldown after `failures`
// consecutive store failures (including attempts that time out); every
// call that would reach the store (grants, Penalize, Throttle, Reset,
// State, Confirm, First) meanwhile fails at once with ErrUnavailable (wrapping breaker.ErrOpen,
// whose RetryAfter says how long). Callers then defer work exactly as for
// any store outage. Contention (a conflicting transaction) is not a failure.
func WithCircuitBreaker(failures int, cooldown time.Duration) Option {
	return func(l *Limiter) {
		b, err := breaker.New(failures, cooldown)
		if err != nil {
			l.optErr = &ArgumentError{Field: "circuitBreaker", Reason: err.Error()}
			return
		}
		l.breaker = b
	}
}

var tableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// New returns a Limiter on the given client. It checks its options but makes
// no call; a missing table shows on the first call as ErrTableNotFound.
func New(db DynamoDBAPI, opts ...Option) (*Limiter, error) {
	l := &Limiter{db: db, table: DefaultTable, now: time.Now, attempts: 3,
		attemptTimeout: DefaultAttemptTimeout, cacheAge: DefaultDenialCacheAge}
	for _, o := range opts {
		o(l)
	}
	switch {
	case l.optErr != nil:
		return nil, l.optErr
	case db == nil:
		return nil, &ArgumentError{Field: "db", Reason: "nil DynamoDB client"}
	case !tableName.MatchString(l.table):
		return nil, &ArgumentError{Field: "table", Reason: fmt.Sprintf("%q is not a DynamoDB table name (3-255 of a-z A-Z 0-9 _ . -)", l.table)}
	case l.attempts < 1:
		return nil, &ArgumentError{Field: "maxAttempts", Reason: fmt.Sprintf("%d, want ≥ 1", l.attempts)}
	case l.attemptTimeout <= 0:
		return nil, &ArgumentError{Field: "attemptTimeout", Reason: fmt.Sprintf("%v, want > 0", l.attemptTimeout)}
	case l.cacheAge < 0:
		return nil, &ArgumentError{Field: "denialCacheAge", Reason: fmt.Sprintf("%v, want ≥ 0", l.cacheAge)}
	}
	return l, nil
}

// Table returns the table the limiter writes to.
func (l *Limiter) Table() string { return l.table }

// Take grants n tokens now, or fails with an *ExhaustedError carrying the
// exact wait. n > burst fails with ErrNeverGrantable.
func (l *Limiter) Take(ctx context.Context, b Bucket, n int) (Reservation, error) {
	return l.reserve(ctx, b, n, 0)
}

// Reserve books n tokens at the earliest slot no later than maxDelay from
// now. The caller must not spend them before Reservation.Slot, and needs no
// further call to spend them then. When the slot would be later, it fails
// with an *ExhaustedError whose RetryAfter says when the same reservation
// would fit.
func (l *Limiter) Reserve(ctx context.Context, b Bucket, n int, maxDelay time.Duration) (Reservation, error) {
	return l.reserve(ctx, b, n, maxDelay)
}

// Wait reserves n tokens and sleeps until their slot. It fails at once,
// without sleeping, with an *ExhaustedError when the slot lies past maxWait
// or past ctx's deadline (also when n tokens could fit within maxWait but
// not before the deadline: that is a denial for this ctx, never
// ErrNeverGrantable). If ctx ends during the sleep the tokens stay spent (a
// fleet bucket cannot safely hand tokens back) and ctx's error is returned.
//
// A slot an adaptive bucket granted while probing above the rate that held
// (Reservation.Probing), ConfirmAfter or more ahead, is confirmed with one
// read when it comes (Confirm); if a throttle revoked it meanwhile, Wait
// books again within what is left of maxWait, so the fleet's slots at the
// probing rate do not each earn a 429 after the first.
func (l *Limiter) Wait(ctx context.Context, b Bucket, n int, maxWait time.Duration) (Reservation, error) {
	if err := b.Validate(); err != nil {
		return Reservation{}, err
	}
	// Whether the request can ever be granted depends on maxWait, the
	// caller's bound; the deadline only decides whether it is granted now.
	if err := gcra.Check(b.Limit, n, maxWait.Microseconds()); err != nil {
		return Reservation{}, err
	}
	bound, err := l.waitBound(ctx, maxWait)
	if err != nil {
		return Reservation{}, err
	}
	start := l.now()
	for {
		g, err := l.book(ctx, b, func(int64, int64, Limit) int { return n }, bound)
		if err != nil {
			return Reservation{}, err
		}
		if err := l.sleepUntil(ctx, g.Slot); err != nil {
			return Reservation{}, err
		}
		ok, err := l.confirmed(ctx, b, g)
		if err != nil {
			return Reservation{}, err
		}
		if ok {
			return g.Reservation, nil
		}
		// A throttle since the grant revoked this slot: book again
		// at the rate that held, within what is left of maxWait.
		if bound, err = l.waitBound(ctx, max(maxWait-l.now().Sub(start), 0)); err != nil {
			return Reservation{}, err
		}
	}
}

// waitBound is the longest a Wait may reserve ahead: maxWait, or less if
// ctx's deadline comes first. A deadline already passed is an error, so
// nothing is reserved that could not be waited for.
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

// sleepUntil sleeps until slot (by this limiter's clock) or ctx's end.
func (l *Limiter) sleepUntil(ctx context.Context, slot time.Time) error {
	if d := slot.Sub(l.now()); d > 0 {
		return ctxsleep.Sleep(ctx, d)
	}
	return nil
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// reserve checks a request for n tokens and books it.
func (l *Limiter) reserve(ctx context.Context, b Bucket, n int, maxDelay time.Duration) (Reservation, error) {
	if err := b.Validate(); err != nil {
		return Reservation{}, err
	}
	if err := gcra.Check(b.Limit, n, maxDelay.Microseconds()); err != nil {
		return Reservation{}, err
	}
	g, err := l.book(ctx, b, func(int64, int64, Limit) int { return n }, maxDelay)
	return g.Reservation, err
}

// grant is a successful write: the reservation, and the tat and now it was
// made with, from which a batch's slots follow.
type grant struct {
	Reservation
	tat, now int64
	lim      Limit // the effective limit of the write
}

// sent is what one write of a call asked for, to rebuild its grant when a
// later write finds it landed.
type sent struct {
	n   int
	now int64
	lim Limit      // the effective limit it was decided with
	st  AdaptState // and the adaptive state that limit came from
}

// book is the one place a grant is decided; Take, Reserve, Wait and
// ReserveBatch all come through it. size says how many tokens to ask for
// given the tat seen and now; it is asked again after a failed condition,
// since a batch's size depends on the state.
//
// The call reads the clock once and keeps that now across failed
// conditions: a failed idle write hands back tat > now, so the busy write
// that follows cannot fail its first clause, and the call decides in at
// most two writes unless the item is reset or deleted between them. (A
// fresh now per attempt lets a write whose latency exceeds the gap between
// tat and now flip between forms without end.) The clock is read again only
// after a pause (a backoff after a store error), where keeping the old now
// would let a write land long after the time it claims.
func (l *Limiter) book(ctx context.Context, b Bucket, size func(tat, now int64, lim Limit) int, maxDelay time.Duration) (grant, error) {
	delay := maxDelay.Microseconds()
	call := newCallTag()
	now := micros(l.now())
	tat, booked, fresh := l.seen.lookup(b.Key, now, l.cacheAge.Microseconds())
	current := false // tat is what the store handed back to this call
	var (
		writes    []sent
		lastErr   error // the last store error, if the last write had one
		contended error // the last conflicting transaction, if any
	)
	for {
		// An adaptive bucket's limit is recomputed each time round: a
		// failed condition may have handed back a newer state.
		lim, st := l.effective(b, now)
		T, tau := lim.Interval(), lim.Tolerance()
		n := size(tat, now, lim)
		d := gcra.Decide(tat, now, lim, n, delay)
		if !d.Allowed && l.final(tat, booked, now, d.RetryAfter, fresh, current) {
			return grant{}, &ExhaustedError{Key: b.Key, N: n, RetryAfter: l.retryAfter(now, d.RetryAfter, len(writes) > 0)}
		}
		// Any other denial is confirmed by a write: the busy form below
		// cannot pass unless tat went backwards (a reset), and its failed
		// condition hands back the current item.
		if len(writes) == l.attempts {
			if lastErr != nil {
				return grant{}, lastErr
			}
			// Only a reset or deletion between writes, or a conflicting
			// transaction, gets here: not a denial, not an outage.
			return grant{}, &ContendedError{Key: b.Key, Writes: len(writes), Err: contended}
		}
		if err := ctx.Err(); err != nil {
			return grant{}, err
		}
		f := idle
		if tat > now {
			f = busy
		}
		nT := int64(n) * T
		in := l.takeInput(b.Key, f, now, nT, now+tau-nT+delay, adaptTTL(b, st, now+tau+delay), call, len(writes))
		if b.Adaptive != nil {
			withVersion(in, st.Version)
		}
		writes = append(writes, sent{n: n, now: now, lim: lim, st: st})
		out, err := l.updateItem(ctx, in, noSDKRetry)
		if err == nil {
			return l.granted(b, lim, st, n, now, out.Attributes)
		}
		if item, failed := conditionFailed(err); failed {
			if i, left, ours := call.landed(item); ours && i < len(writes) {
				// An earlier write of this call landed and its answer was
				// lost; its lane says what tat it left.
				if cur, err := itemTAT(item); err == nil {
					bk, _ := itemBooked(item)
					l.seen.set(b.Key, cur, bk, micros(l.now()))
				}
				w := writes[i]
				return l.grantedTAT(b, w.lim, w.st, w.n, w.now, left), nil
			}
			if tat, err = l.learnItem(b.Key, item); err != nil {
				return grant{}, err
			}
			current, lastErr = true, nil
			continue
		}
		lastErr, contended = err, nil
		if isConflict(err) {
			lastErr, contended = nil, errors.Unwrap(err)
		} else if !errors.Is(err, ErrUnavailable) || errors.Is(err, breaker.ErrOpen) {
			return grant{}, err
		}
		if len(writes) == l.attempts {
			continue
		}
		if err := ctxsleep.Sleep(ctx, backoff(len(writes))); err != nil {
			if lastErr != nil {
				return grant{}, lastErr
			}
			return grant{}, err
		}
		// Paused: a fresh now, so that the next write claims the time it
		// is sent at. The tat seen stays (it is still a lower bound).
		now = micros(l.now())
	}
}

// final reports whether a denial decided on tat (with the booked horizon
// booked, both as this process saw them, fresh if within the cache age) at
// now, with the given wait, is the answer, with no write to confirm it:
//   - when the store handed tat back to this call, the denial is exact;
//   - when even a full bucket denies (a Wait whose deadline is nearer than n
//     tokens' refill), nothing can change it;
//   - a denial for no longer than the cache age: the caller is back within
//     the bound a Reset promises;
//   - a recent tat at the booked horizon: only deleting the item lowers
//     that, never a Reset, so the denial and its wait stand.
//
// Any other denial comes from a tat a penalty raised above the booked
// horizon, or from an old entry. A Reset may have dropped that penalty
// since (it lowers tat to the booked horizon), and a denial carrying the
// penalty's wait would hold the caller (a dispatcher deferring a job) for
// a wait the bucket no longer has: confirm it with a write.
func (l *Limiter) final(tat, booked, now, wait int64, fresh, current bool) bool {
	switch {
	case current, tat <= now, wait <= l.cacheAge.Microseconds():
		return true
	}
	return fresh && tat <= booked
}

// retryAfter turns a denial's wait, exact at the call's now, into a wait
// from the moment the caller gets it: after writes, the store's latency has
// passed since now, and a worker that slept the whole wait from its return
// would wake that much late, every time.
func (l *Limiter) retryAfter(now, wait int64, wrote bool) time.Duration {
	if wrote {
		wait = max(now+wait-micros(l.now()), 0)
	}
	return time.Duration(wait) * time.Microsecond
}

func (l *Limiter) granted(b Bucket, lim Limit, st AdaptState, n int, now int64, item map[string]types.AttributeValue) (grant, error) {
	tat, err := itemTAT(item)
	if err != nil || tat == 0 {
		return grant{}, &StoreError{Table: l.table, Op: "UpdateItem", kind: ErrUnavailable,
			Err: fmt.Errorf("write succeeded but returned no valid tat (err %v): is ReturnValues=ALL_NEW honoured?", err)}
	}
	l.seen.book(b.Key, tat, micros(l.now()))
	return l.grantedTAT(b, lim, st, n, now, tat), nil
}

// grantedTAT is the grant of n tokens by a write made at now, with the
// effective limit lim from adaptive state st, that left tat.
func (l *Limiter) grantedTAT(b Bucket, lim Limit, st AdaptState, n int, now, tat int64) grant {
	slot := max(tat-lim.Tolerance(), now)
	r := Reservation{Key: b.Key, Tokens: n, Slot: time.UnixMicro(slot), Remaining: gcra.Remaining(tat, now, lim),
		Rate: lim.Rate, adaptive: b.Adaptive != nil, version: st.Version, interval: lim.Interval(),
		probing: b.Adaptive != nil && b.Adaptive.Climbing(st, b.Limit, now)}
	return grant{Reservation: r, tat: tat, now: now, lim: lim}
}

// learnItem reads the tat of the item a failed condition (or a Reset)
// returned (0 for no item) and remembers it, with the booked horizon and
// the adaptive state, as the store's current values.
func (l *Limiter) learnItem(key string, item map[string]types.AttributeValue) (int64, error) {
	tat, err := itemTAT(item)
	if err != nil {
		return 0, &StoreError{Table: l.table, Op: "UpdateItem", kind: ErrUnavailable, Err: fmt.Errorf("bucket %q: %w", key, err)}
	}
	booked, err := itemBooked(item)
	if err != nil {
		return 0, &StoreError{Table: l.table, Op: "UpdateItem", kind: ErrUnavailable, Err: fmt.Errorf("bucket %q: %w", key, err)}
	}
	st, err := itemAdapt(item)
	if err != nil {
		return 0, &StoreError{Table: l.table, Op: "UpdateItem", kind: ErrUnavailable, Err: fmt.Errorf("bucket %q: %w", key, err)}
	}
	l.seen.set(key, tat, booked, micros(l.now()))
	l.adapt.set(key, st)
	return tat, nil
}

// observeItem learns from the item a failed condition returned.
func (l *Limiter) observeItem(key string, item map[string]types.AttributeValue) error {
	_, err := l.learnItem(key, item)
	return err
}

// updateItem sends one write through the gateway. A failed condition comes
// back as the SDK's error, for the caller to read ALL_OLD; every other
// failure comes back classified as a *StoreError.
func (l *Limiter) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	var out *dynamodb.UpdateItemOutput
	err := l.gateway(ctx, "UpdateItem", func(ctx context.Context) (err error) {
		out, err = l.db.UpdateItem(ctx, in, optFns...)
		return err
	})
	return out, err
}

// gateway is the one way to DynamoDB: every call the limiter makes (grants,
// penalties, resets, reads, fences, transactions) goes through it, so an
// open circuit breaker stops them all and every outcome feeds it. send
// makes the call, bounded by the per-attempt timeout. An error that is the
// store's answer (a failed condition, a cancelled transaction) comes back
// as it is and counts as a success: the store was reached. Every other
// failure comes back classified as a *StoreError.
func (l *Limiter) gateway(ctx context.Context, op string, send func(ctx context.Context) error) error {
	if l.breaker != nil {
		if err := l.breaker.Allow(l.now()); err != nil {
			return &StoreError{Table: l.table, Op: op, kind: ErrUnavailable, Err: err}
		}
	}
	actx, cancel := context.WithTimeout(ctx, l.attemptTimeout)
	defer cancel()
	err := send(actx)
	if err == nil || answered(err) {
		l.recordStore(true)
		return err
	}
	return l.storeFailure(ctx, actx, op, err)
}

// answered reports an error that is the store's answer to a well-formed
// call: a failed condition, or a transaction cancelled (for a failed
// condition, a conflict or throttling, which its reasons tell apart).
func answered(err error) bool {
	var canceled *types.TransactionCanceledException
	_, failed := conditionFailed(err)
	return failed || errors.As(err, &canceled)
}

// storeFailure classifies a failed call and tells the breaker: a conflicting
// transaction is contention and tells it nothing; a caller that cancelled
// tells it nothing; an attempt or caller deadline that expired is a store
// failure, as is anything unavailable.
func (l *Limiter) storeFailure(ctx, actx context.Context, op string, err error) error {
	var conflict *types.TransactionConflictException
	if errors.As(err, &conflict) {
		return &conflictError{err: err}
	}
	serr := l.storeError(ctx, op, err)
	if ctx.Err() == nil && actx.Err() != nil {
		serr = &StoreError{Table: l.table, Op: op, kind: ErrUnavailable,
			Err: fmt.Errorf("%w: %w", &AttemptTimeoutError{Op: op, Timeout: l.attemptTimeout}, err)}
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
	case errors.Is(serr, ErrUnavailable), errors.Is(ctx.Err(), context.DeadlineExceeded):
		l.recordStore(false)
	default:
		l.recordStore(true)
	}
	return serr
}

// conflictError marks a store error that is contention (an UpdateItem on an
// item inside an in-flight transaction): retried with backoff, never fed to
// the breaker, and reported as ErrContended when the attempts run out.
type conflictError struct{ err error }

func (e *conflictError) Error() string { return e.err.Error() }
func (e *conflictError) Unwrap() error { return e.err }

func isConflict(err error) bool {
	var c *conflictError
	return errors.As(err, &c)
}

// backoff is the pause before retry number i (1-based) after a store error
// or a conflict: full jitter over an exponential ceiling of 10ms·2^(i−1),
// capped at 500ms, so that workers that failed together do not retry
// together. The caller's ctx bounds it.
func backoff(i int) time.Duration {
	ceiling := min(10*time.Millisecond<<min(i-1, 6), 500*time.Millisecond)
	return time.Duration(rand.Int64N(int64(ceiling)) + 1)
}

func (l *Limiter) recordStore(ok bool) {
	if l.breaker != nil {
		l.breaker.Record(l.now(), ok)
	}
}

// storeError classifies a failed call. Only ErrUnavailable is worth another
// attempt.
func (l *Limiter) storeError(ctx context.Context, op string, err error) error {
	var notFound *types.ResourceNotFoundException
	switch {
	case ctx.Err() != nil:
		return &StoreError{Table: l.table, Op: op, kind: ErrOutcomeUnknown, Err: err}
	case errors.As(err, &notFound):
		return &StoreError{Table: l.table, Op: op, kind: ErrTableNotFound, Err: err}
	}
	return &StoreError{Table: l.table, Op: op, kind: ErrUnavailable, Err: err}
}

// Penalize empties bucket b until `until` for every worker at once, as when
// the vendor answers 429 with Retry-After: nothing is granted before until,
// and the burst refills gradually after it. A bucket already emptied past
// that is left alone. until may be at most MaxPenalty (24h) after now; a
// later one is refused with an *ArgumentError on "until" (clamp a vendor's
// Retry-After before passing it).
func (l *Limiter) Penalize(ctx context.Context, b Bucket, until time.Time) error {
	if err := b.Validate(); err != nil {
		return err
	}
	now := l.now()
	if until.Sub(now) > MaxPenalty {
		return &ArgumentError{Field: "until", Reason: fmt.Sprintf("%v after now, want at most %v (limiter.MaxPenalty)", until.Sub(now), MaxPenalty)}
	}
	lim, st := l.effective(b, micros(now))
	return l.penalize(ctx, b, until, lim, st)
}

// penalize empties b until `until` at the effective limit lim (from the
// adaptive state st): the burst lim allows refills after it.
//
// An adaptive bucket's penalty is conditional on the version of st, like
// every write of it: the penalty's tat and the TTL both follow from the
// learned rate, and a process that has not seen it (say, one that just
// started) would empty the bucket at the configured rate and set a TTL
// that forgets the learned one early. A failed condition hands back the
// state, and the penalty is decided again on it.
func (l *Limiter) penalize(ctx context.Context, b Bucket, until time.Time, lim Limit, st AdaptState) error {
	now := l.now()
	for attempt := 0; attempt < l.attempts; attempt++ {
		penalty := gcra.Penalty(micros(until), lim)
		if _, booked, fresh := l.seen.lookup(b.Key, micros(now), l.cacheAge.Microseconds()); fresh && booked >= penalty {
			// Slots are booked past until: the bucket is already empty
			// past it, and no Reset changes that (it keeps booked slots).
			// This is the common case for a drain on a vendor's low
			// remaining count while the fleet has booked slots ahead, and
			// it costs no call. A penalty seen before proves nothing: a
			// Reset may have dropped it.
			return nil
		}
		// Setting an absolute value is idempotent, so the SDK's own retries
		// are safe here.
		in := l.penalizeInput(b.Key, penalty, adaptTTL(b, st, penalty))
		if b.Adaptive != nil {
			withVersion(in, st.Version)
		}
		_, err := l.updateItem(ctx, in)
		if err == nil {
			l.seen.observe(b.Key, penalty, micros(l.now()))
			return nil
		}
		item, failed := conditionFailed(err)
		if !failed {
			return contention(b.Key, err)
		}
		if err := l.observeItem(b.Key, item); err != nil || b.Adaptive == nil {
			return err
		}
		cur := l.adapt.get(b.Key)
		if cur.Version == st.Version {
			return nil // the same state: tat was already past the penalty
		}
		st, lim = cur, b.Adaptive.Effective(cur, b.Limit, micros(now))
	}
	return &ContendedError{Key: b.Key, Writes: l.attempts}
}

// contention turns a conflicting transaction met by a single write into
// an ErrContended error; other errors pass.
func contention(key string, err error) error {
	if isConflict(err) {
		return &ContendedError{Key: key, Writes: 1, Err: errors.Unwrap(err)}
	}
	return err
}

// Reset empties bucket b of every penalty, for every worker: an operator's
// undo of a Penalize (or of an adaptive bucket's emptying after a lowered
// rate). It lowers tat to the booked horizon, the tat the last grant left,
// and no further: slots already handed out (up to the max delay ahead)
// keep counting, so the fleet's bound, burst + rate·W in any window W,
// holds across a Reset (see Resets in the package documentation). A bucket
// with nothing booked ahead is full at once; one booked ahead grants again
// one interval after its last booked slot, as if no penalty had come. The
// adaptive state (a learned rate) is kept. Reset is idempotent.
//
// Every worker sees it on its next call: a denial this process answers
// without a call comes only from the booked horizon, which a Reset keeps
// (see final), or is no longer than the denial cache age.
func (l *Limiter) Reset(ctx context.Context, b Bucket) error {
	if err := b.Validate(); err != nil {
		return err
	}
	out, err := l.updateItem(ctx, l.resetInput(b.Key))
	if err == nil {
		return l.observeItem(b.Key, out.Attributes)
	}
	if item, failed := conditionFailed(err); failed {
		// Nothing above the booked horizon (or no item): nothing to drop.
		return l.observeItem(b.Key, item)
	}
	return contention(b.Key, err)
}

// State reads bucket b with a strongly consistent read. It is for operators
// and dashboards; granting never needs it.
func (l *Limiter) State(ctx context.Context, b Bucket) (State, error) {
	if err := b.Validate(); err != nil {
		return State{}, err
	}
	tat, st, err := l.read(ctx, b.Key)
	if err != nil {
		return State{}, err
	}
	now := micros(l.now())
	lim, _ := l.effective(b, now)
	s := State{Key: b.Key, Tokens: gcra.Remaining(tat, now, lim), Rate: lim.Rate}
	if b.Adaptive != nil {
		s.Adapt = st
	}
	if tat > 0 {
		s.TAT = time.UnixMicro(tat)
		s.FullAfter = max(time.UnixMicro(tat).Sub(time.UnixMicro(now)), 0)
	}
	return s, nil
}
