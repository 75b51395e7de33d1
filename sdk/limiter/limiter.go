package limiter

import (
	"context"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/internal/ctxsleep"
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
	// effective rate for the whole fleet (see "Adaptive limits" in the
	// repository's docs/design.md). Every worker of a bucket must pass the same
	// Adaptive, as the same Limit. Single-bucket calls only: TakeMulti and
	// ReserveMulti refuse an adaptive bucket among several.
	Adaptive *Adaptive
	// Share, if set, leases parts of the bucket's rate to execution
	// environments while it idles (see Share). Every worker of a bucket
	// must pass the same Share; single-bucket calls only, never with
	// Adaptive.
	Share *Share
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
		if b.Share != nil {
			return &ArgumentError{Field: "bucket.share", Reason: "an adaptive bucket cannot lease shares"}
		}
		return b.Adaptive.Validate(b.Limit)
	}
	if b.Share != nil {
		return b.Share.Validate(b.Limit)
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
	// Unspent counts the grants a Wait booked before this one and left
	// unspent because each came back later than the bucket's margin allows
	// (see Late); they stay charged.
	Unspent int

	adaptive bool  // granted by an adaptive bucket's write
	version  int64 // the adaptive state's version that write conditioned on
	interval int64 // the effective emission interval (µs) it was granted at
	probing  bool  // granted above the adaptive state's Base (see Probing)

	// Leased is set on a grant this process's lease of the bucket made,
	// with no write (see Share).
	Leased bool
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
	silent         seenSilence
	heard          heardSilence
	probation      seenProbation
	caps           seenCaps
	shares         seenShares
	born           int64            // µs: when New made it, by its clock (see Share.Quiet)
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
// call that would reach the store (grants, Reset, State, Confirm, First)
// meanwhile fails at once with ErrUnavailable (wrapping breaker.ErrOpen,
// whose RetryAfter says how long). Callers then defer work exactly as for
// any store outage. The writes of Penalize and Throttle are sent all the
// same (updatePenalty). Contention (a conflicting transaction) is not a
// failure.
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
	l.born = micros(l.now())
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
// now. The caller must not spend them before Reservation.Slot. When the
// slot would be later, it fails with an *ExhaustedError whose RetryAfter
// says when the same reservation would fit.
//
// A slot that lies SilenceAfter or more past its grant is held while the
// vendor may speak: before spending it, check Silence (a 429 any worker
// met since asks the credential's whole traffic to wait), and on an
// adaptive bucket Confirm its Stamp. A slot booked ahead at a rate a
// throttle or Publish has lowered since counts one old interval, not one
// new one, so grants made after the lowering fit in among it: spent
// unchecked, the slots of one window can reach b·T′/T + r·W, T′/T the
// lowering (twice the burst after a halving). Wait does both checks
// itself, and so does the pipeline's dispatcher for the slots its jobs
// carry; a slot nearer than SilenceAfter needs neither.
func (l *Limiter) Reserve(ctx context.Context, b Bucket, n int, maxDelay time.Duration) (Reservation, error) {
	return l.reserve(ctx, b, n, maxDelay)
}

// ReserveAhead is Reserve with its writes claiming the time ahead from now
// (at most maxDelay, of which it takes its share), so that the slot it
// grants lies at least that far ahead. A caller that knows how long the
// store takes to answer passes that: the answer then comes before the
// slot, and the request leaves at the slot rather than a write's latency
// after it, which past the bucket's margin would make the grant late
// (Late). A write claiming a later now only forgoes the refill until then
// (see Wait): the bucket's bound on slots holds whatever now it claims.
func (l *Limiter) ReserveAhead(ctx context.Context, b Bucket, n int, maxDelay, ahead time.Duration) (Reservation, error) {
	if err := b.Validate(); err != nil {
		return Reservation{}, err
	}
	if err := gcra.Check(b.Limit, n, maxDelay.Microseconds()); err != nil {
		return Reservation{}, err
	}
	if r, ok := l.localGrant(ctx, b, n, min(max(ahead, 0), maxDelay)); ok {
		return r, nil
	}
	g, err := l.bookAhead(ctx, b, func(int64, int64, Limit, int64) int { return n }, maxDelay, ahead, false)
	return g.Reservation, err
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
// probing rate do not each earn a 429 after the first. Any slot granted
// SilenceAfter or more ahead is checked, when it comes, against the
// silence a 429 asked since (Silence: no call if this process heard from
// the bucket within SilenceAfter, one read otherwise); inside it, Wait
// books again the same way, behind the penalty. So is one an adaptive
// bucket granted at a rate a change has lowered since (what that check
// learned of the item: no other call).
//
// A grant Wait could only hand back later than the bucket's margin allows
// (Late: its write answered, or its sleep ended, more than Limit.Margin
// after its slot) is never returned: the vendor's window would count its
// request beside grants made since. Wait leaves it unspent
// (Reservation.Unspent) and books again within what is left of maxWait,
// a slot at least as far ahead as the late one came late, so that a store
// as slow again answers before it; after MaxLateGrants such grants in a
// row it fails with a
// *LateGrantError, which matches ErrUnavailable. The caller should send
// at once: Late applies to the moment the request leaves.
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
	unspent, ahead := 0, time.Duration(0)
	if r, ok := l.localGrant(ctx, b, n, 0); ok {
		return r, nil
	}
	for {
		g, err := l.bookAhead(ctx, b, func(int64, int64, Limit, int64) int { return n }, bound, ahead, false)
		if err != nil {
			return Reservation{}, err
		}
		// The check reads the store when its last answer is older than
		// SilenceAfter: made that long before the slot, its latency
		// delays the check, not the send (read at the slot, every such
		// grant came late by a read and was booked again).
		if err := l.sleepUntil(ctx, g.Slot.Add(-SilenceAfter)); err != nil {
			return Reservation{}, err
		}
		ok, err := l.confirmed(ctx, b, g)
		if err != nil {
			return Reservation{}, err
		}
		if err := l.sleepUntil(ctx, g.Slot); err != nil {
			return Reservation{}, err
		}
		if ok {
			// Checked after the sleep and the confirming read, the last
			// of what comes between the grant and the send.
			late := Late(b.Limit, g.Slot, l.now())
			if late == 0 {
				g.Reservation.Unspent = unspent
				return g.Reservation, nil
			}
			if unspent++; unspent == MaxLateGrants {
				return Reservation{}, &LateGrantError{Key: b.Key, Grants: unspent, Slot: g.Slot, Late: late, Margin: b.Limit.Margin}
			}
			// Book the next slot as far ahead as this one came late, so
			// that a store as slow again answers before it: booked at
			// once, it would be as late and as wasted.
			ahead = l.now().Sub(g.Slot)
		}
		// A throttle since the grant revoked this slot, or the grant came
		// too late to spend: book again at the rate that holds, within
		// what is left of maxWait.
		if bound, err = l.waitBound(ctx, max(maxWait-l.now().Sub(start), 0)); err != nil {
			return Reservation{}, err
		}
	}
}

// waitBound is the longest a Wait may reserve ahead: maxWait, or less if
// ctx's deadline comes first. A deadline already passed is an error, so
// nothing is reserved that could not be waited for.
func (l *Limiter) waitBound(ctx context.Context, maxWait time.Duration) (time.Duration, error) {
	return boundWait(ctx, l.now(), maxWait)
}

// Now reads the limiter's clock (WithClock): the one its slots and leases
// are stamped with.
func (l *Limiter) Now() time.Time { return l.now() }

// boundWait is maxWait, or less if ctx's deadline comes first by the
// clock's reading now; a deadline already passed is an error.
func boundWait(ctx context.Context, now time.Time, maxWait time.Duration) (time.Duration, error) {
	bound := maxWait
	if deadline, ok := ctx.Deadline(); ok {
		bound = min(bound, deadline.Sub(now))
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
	if r, ok := l.localGrant(ctx, b, n, 0); ok {
		return r, nil
	}
	g, err := l.book(ctx, b, func(int64, int64, Limit, int64) int { return n }, maxDelay)
	return g.Reservation, err
}
