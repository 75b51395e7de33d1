package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// MaxMultiBuckets is the most buckets one multi-bucket call may name:
// DynamoDB's limit of 100 items per TransactWriteItems.
const MaxMultiBuckets = 100

// TransactAPI is the one method multi-bucket calls (TakeMulti,
// ReserveMulti, WaitMulti) need beyond DynamoDBAPI. *dynamodb.Client has
// it. DynamoDBAPI does not include it, so existing wrappers keep working for
// single-bucket calls; a wrapper that should also serve multi-bucket calls
// implements this method as well, and New's client is type-asserted to it
// on each multi-bucket call.
type TransactAPI interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// ErrNoTransactions: a multi-bucket call on a Limiter whose client has no
// TransactWriteItems method (see TransactAPI). Nothing was sent.
var ErrNoTransactions = errors.New("fleetbucket: the DynamoDB client has no TransactWriteItems method (see limiter.TransactAPI)")

// MultiReservation is a grant of Tokens tokens from every bucket in Keys,
// made by one transaction: all of them were charged, or none.
type MultiReservation struct {
	// Keys are the buckets charged, in the order of the request.
	Keys   []string
	Tokens int
	// Slot is the common slot: the latest of the buckets' own slots (the
	// call's own now for a take). Every bucket was charged n tokens at
	// Slot, including those whose own slot is earlier: the caller spends
	// the tokens at Slot, once, for all of them.
	Slot time.Time
	// Binding is the bucket whose own slot is Slot: the one that held the
	// request back (the first, for a take).
	Binding string
	// Unspent counts the grants a WaitMulti booked before this one and
	// left unspent, each later than a bucket's margin allows (Late).
	Unspent int
}

// Delay is how long after now the common slot falls (0 if it has passed).
func (r MultiReservation) Delay(now time.Time) time.Duration { return max(r.Slot.Sub(now), 0) }

// TakeMulti takes n tokens now from every bucket, atomically: either every
// bucket grants, or none is charged. A denial is an *ExhaustedError whose
// Key is the bucket that waits longest and whose RetryAfter is the maximum
// over the denying buckets, which is exact: the same request fits in all of
// them then, unless others take tokens meanwhile.
//
// Typical uses: a credential's per-second and per-minute limits, and a
// property's share nested inside the credential's quota (the property's
// bucket and the credential's in one call, so a property over its share
// cannot take the credential's tokens).
//
// One bucket costs one UpdateItem, as Take. Several cost one
// TransactWriteItems (DynamoDB bills 2 write units per item of a
// transaction), with each item the same guarded idle or busy update Take
// sends, its form picked from the tat this process last saw. On a
// cancelled transaction each item's current state comes back (ALL_OLD in
// the cancellation reasons) and either proves the denial or picks the forms
// for the next attempt, with a fresh now (at most the WithMaxAttempts
// writes plus one per bucket beyond the first, since each may need its form
// corrected); denials provable from the tats already seen cost no call.
//
// Refused with an *ArgumentError before anything is sent: no buckets, more
// than MaxMultiBuckets, the same key twice (field "bucket.key"), and any
// invalid bucket or n for one of them (the message names buckets[i]). The
// client must implement TransactAPI for two buckets or more
// (ErrNoTransactions otherwise). Store failures are typed as for Take:
// ErrUnavailable, ErrOutcomeUnknown, ErrTableNotFound.
func (l *Limiter) TakeMulti(ctx context.Context, buckets []Bucket, n int) (MultiReservation, error) {
	return l.reserveMulti(ctx, buckets, n, 0)
}

// ReserveMulti books n tokens from every bucket at one common slot no later
// than maxDelay from now, atomically, as TakeMulti does for a take.
//
// The common slot is the latest of the buckets' own slots, and every
// bucket's write is guarded so that its own slot is no later than the
// common one. Every bucket is charged n tokens at the common slot, as a
// request arriving then (gcra.MultiDecision): its tokens are spent there,
// so each bucket keeps burst + rate·W over the slots spent in it, as a
// vendor counting each of its windows at arrival sees them. A bucket whose
// own slot is earlier forgoes its refill until the common slot: one that
// other requests also use alone or with other buckets (a credential under
// per-property shares) grants them nothing before it, so keep maxDelay
// short for those.
//
// On a busy bucket the write is bounded by the common slot, so the binding
// bucket's write only passes if no one else wrote it since this process
// saw it; a lost race is retried with the item the cancellation returned.
func (l *Limiter) ReserveMulti(ctx context.Context, buckets []Bucket, n int, maxDelay time.Duration) (MultiReservation, error) {
	return l.reserveMulti(ctx, buckets, n, maxDelay)
}

// WaitMulti reserves n tokens from every bucket (ReserveMulti) and sleeps
// until the common slot. It fails at once, without sleeping, with an
// *ExhaustedError when the slot lies past maxWait or ctx's deadline. If ctx
// ends during the sleep the tokens stay spent and ctx's error is returned.
// Like Wait, it never hands back a slot later than any bucket's margin
// allows (Late), books again instead, and fails with a *LateGrantError
// after MaxLateGrants such slots in a row; and, like Wait, it checks a
// common slot granted SilenceAfter or more ahead against the silence a
// vendor asked of any of the buckets since (silentMulti), and books again,
// behind the penalty, inside one.
func (l *Limiter) WaitMulti(ctx context.Context, buckets []Bucket, n int, maxWait time.Duration) (MultiReservation, error) {
	bound, err := l.waitBound(ctx, maxWait)
	if err != nil {
		return MultiReservation{}, err
	}
	start := l.now()
	for unspent := 0; ; {
		asked := l.now()
		r, err := l.reserveMulti(ctx, buckets, n, bound)
		if err != nil {
			return MultiReservation{}, err
		}
		if err := l.sleepUntil(ctx, r.Slot.Add(-SilenceAfter)); err != nil {
			return MultiReservation{}, err
		}
		quiet, err := l.silentMulti(ctx, buckets, r.Slot, asked)
		if err != nil {
			return MultiReservation{}, err
		}
		if err := l.sleepUntil(ctx, r.Slot); err != nil {
			return MultiReservation{}, err
		}
		if !quiet {
			if bound, err = l.waitBound(ctx, max(maxWait-l.now().Sub(start), 0)); err != nil {
				return MultiReservation{}, err
			}
			continue
		}
		late, b := lateMulti(buckets, r.Slot, l.now())
		if late == 0 {
			r.Unspent = unspent
			return r, nil
		}
		if unspent++; unspent == MaxLateGrants {
			return MultiReservation{}, &LateGrantError{Key: b.Key, Grants: unspent, Slot: r.Slot, Late: late, Margin: b.Limit.Margin}
		}
		if bound, err = l.waitBound(ctx, max(maxWait-l.now().Sub(start), 0)); err != nil {
			return MultiReservation{}, err
		}
	}
}

// silentMulti reports whether a common slot asked for at `asked` may be
// spent. One less than SilenceAfter after the call began is the race every
// slot due at once runs, and is spent unchecked (the transaction hands
// back no grant time: its start is the earliest the grant's could be, so
// no slot Wait would check goes unchecked here). One further ahead is not
// spent inside a silence a vendor asked of any of its buckets since: a
// penalty delays only the grants made after it, and a later message of a
// push on a limits[] route, booked seconds ahead on a busy bucket, reached
// the vendor inside a 429's Retry-After (adversary seed 39). A
// transaction's answer carries no item, so each bucket costs one read
// unless this process heard from it within SilenceAfter (Silence).
func (l *Limiter) silentMulti(ctx context.Context, buckets []Bucket, slot, asked time.Time) (bool, error) {
	if slot.Sub(asked) < SilenceAfter {
		return true, nil
	}
	for _, b := range buckets {
		until, err := l.Silence(ctx, b)
		if err != nil || !until.IsZero() {
			return false, err
		}
	}
	return true, nil
}

// CheckMulti reports, as an *ArgumentError, what is wrong with a
// multi-bucket request: the checks TakeMulti and ReserveMulti make before
// sending anything.
func CheckMulti(buckets []Bucket, n int, maxDelay time.Duration) error {
	switch {
	case len(buckets) == 0:
		return &ArgumentError{Field: "buckets", Reason: "none, want at least one"}
	case len(buckets) > MaxMultiBuckets:
		return &ArgumentError{Field: "buckets", Reason: fmt.Sprintf("%d, want at most %d (TransactWriteItems takes at most %d items)", len(buckets), MaxMultiBuckets, MaxMultiBuckets)}
	}
	first := make(map[string]int, len(buckets))
	for i, b := range buckets {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("buckets[%d]: %w", i, err)
		}
		if j, dup := first[b.Key]; dup {
			return fmt.Errorf("buckets[%d]: %w", i, &ArgumentError{Field: "bucket.key",
				Reason: fmt.Sprintf("%q is also buckets[%d]: one transaction cannot write an item twice", b.Key, j)})
		}
		first[b.Key] = i
		if b.Share != nil {
			// A transaction's write knows no leases: it would charge the
			// whole rate beside them.
			return fmt.Errorf("buckets[%d]: %w", i, &ArgumentError{Field: "bucket.share",
				Reason: fmt.Sprintf("%q leases shares: such buckets are for single-bucket calls only", b.Key)})
		}
		if b.Adaptive != nil && len(buckets) > 1 {
			// A transaction hands back no new values, so its workers could
			// not learn a changed rate from its answer.
			return fmt.Errorf("buckets[%d]: %w", i, &ArgumentError{Field: "bucket.adaptive",
				Reason: fmt.Sprintf("%q is adaptive: adaptive buckets are for single-bucket calls only", b.Key)})
		}
		if err := gcra.Check(b.Limit, n, maxDelay.Microseconds()); err != nil {
			return fmt.Errorf("buckets[%d] (%q): %w", i, b.Key, err)
		}
	}
	return nil
}

func (l *Limiter) reserveMulti(ctx context.Context, buckets []Bucket, n int, maxDelay time.Duration) (MultiReservation, error) {
	if err := CheckMulti(buckets, n, maxDelay); err != nil {
		return MultiReservation{}, err
	}
	if len(buckets) == 1 {
		// One item needs no transaction: the single write is cheaper (1
		// write unit, not 2) and returns the new tat.
		r, err := l.reserve(ctx, buckets[0], n, maxDelay)
		if err != nil {
			return MultiReservation{}, err
		}
		return MultiReservation{Keys: []string{r.Key}, Tokens: n, Slot: r.Slot, Binding: r.Key}, nil
	}
	tx, ok := l.db.(TransactAPI)
	if !ok {
		return MultiReservation{}, fmt.Errorf("%w: %T", ErrNoTransactions, l.db)
	}
	return l.bookMulti(ctx, tx, buckets, n, maxDelay.Microseconds())
}

// bookMulti is the multi-bucket counterpart of book: decide on the tats
// seen, confirm with one transaction, learn from a cancellation and retry
// with the same now (see book), at most WithMaxAttempts + len(buckets) − 1
// transactions. Every item carries the call's tag, so a transaction whose
// answer was lost is recognised by the next one's cancellation (one of our
// tags on any item proves the whole transaction landed).
func (l *Limiter) bookMulti(ctx context.Context, tx TransactAPI, buckets []Bucket, n int, delay int64) (MultiReservation, error) {
	limits := make([]Limit, len(buckets))
	keys := make([]string, len(buckets))
	for i, b := range buckets {
		limits[i], keys[i] = b.Limit, b.Key
	}
	// Each bucket may need its own form corrected, so a multi-bucket call
	// gets one more write per extra bucket than a single one.
	attempts := l.attempts + len(buckets) - 1
	call := newCallTag()
	now := micros(l.now())
	tats := make([]int64, len(buckets))  // what the decision uses
	forms := make([]int64, len(buckets)) // what picks each item's form
	// unsure marks the tats a denial may not be answered from with no
	// write (see final): old entries, and tats a penalty raised above the
	// booked horizon, which a Reset may have lowered since.
	unsure := make([]bool, len(buckets))
	stale := false
	for i, k := range keys {
		var (
			booked int64
			fresh  bool
		)
		forms[i], booked, fresh = l.seen.lookup(k, now, l.cacheAge.Microseconds())
		if tats[i] = forms[i]; forms[i] > now && (!fresh || forms[i] > booked) {
			unsure[i], stale = true, true
		}
	}
	type sentMulti struct {
		d    gcra.MultiDecision
		tats []int64
		now  int64
	}
	var (
		writes    []sentMulti
		lastErr   error
		contended error
	)
	for {
		d := gcra.DecideMulti(tats, now, limits, n, delay)
		if !d.Allowed && stale && d.RetryAfter > l.cacheAge.Microseconds() {
			// Confirm a denial predicted from unsure entries with a write:
			// decide as if they were unknown, keep them for the forms.
			for i := range keys {
				if unsure[i] && writes == nil {
					tats[i] = 0
				}
			}
			stale = false
			continue
		}
		if !d.Allowed {
			// Every tat seen is a lower bound of the stored one, and none
			// is unsure, so a denial against them is final.
			return MultiReservation{}, &ExhaustedError{Key: keys[d.Binding], N: n, RetryAfter: time.Duration(d.RetryAfter) * time.Microsecond}
		}
		if len(writes) == attempts {
			if lastErr != nil {
				return MultiReservation{}, lastErr
			}
			return MultiReservation{}, &ContendedError{Key: keys[d.Binding], Writes: len(writes), Err: contended}
		}
		if err := ctx.Err(); err != nil {
			return MultiReservation{}, err
		}
		items := l.bucketItems(buckets, limits, forms, now, n, delay, d, call, len(writes))
		writes = append(writes, sentMulti{d: d, tats: append([]int64(nil), tats...), now: now})
		reasons, err := l.transact(ctx, tx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil && reasons == nil {
			return l.grantedMulti(keys, limits, n, now, d, tats), nil
		}
		if err == nil {
			if w, ours := landedMulti(call, reasons); ours && w < len(writes) {
				// An earlier transaction of this call landed; its answer
				// was lost.
				return l.grantedMulti(keys, limits, n, writes[w].now, writes[w].d, writes[w].tats), nil
			}
			err = l.learnCancellation(keys, reasons)
			for i, r := range reasons {
				// A failed condition's item is the store's current state
				// (learnCancellation checked that it parses).
				if aws.ToString(r.Code) == "ConditionalCheckFailed" {
					tats[i], _ = itemTAT(r.Item)
					forms[i] = tats[i]
				}
			}
			if err == nil {
				lastErr = nil
				continue
			}
		}
		var stop error
		if lastErr, contended, stop = l.storeRetry(ctx, err, len(writes), attempts); stop != nil {
			return MultiReservation{}, stop
		}
		if len(writes) < attempts {
			now = micros(l.now())
		}
	}
}

// grantedMulti remembers what a transaction decided with tats at now left
// in each bucket, and returns the reservation.
func (l *Limiter) grantedMulti(keys []string, limits []Limit, n int, now int64, d gcra.MultiDecision, tats []int64) MultiReservation {
	at := micros(l.now())
	slot := max(d.Slot, now)
	for i, lim := range limits {
		// The idle form set tat to exactly slot + n·T; the busy form added
		// n·T to a tat ≥ the one seen. Both are lower bounds.
		l.seen.book(keys[i], max(tats[i], slot)+int64(n)*lim.Interval(), at)
	}
	return MultiReservation{Keys: keys, Tokens: n, Slot: time.UnixMicro(d.Slot), Binding: keys[d.Binding]}
}

// landedMulti returns the index of this call's transaction whose tag a
// cancelled item carries, if any.
func landedMulti(call callTag, reasons []types.CancellationReason) (int, bool) {
	for _, r := range reasons {
		if i, _, ours := call.landed(r.Item); ours {
			return i, true
		}
	}
	return 0, false
}

// transact sends one transaction through the gateway, with no SDK
// retry (a resent write would carry a stale now). A cancelled transaction
// comes back as its reasons, one per item, with a nil error; every other
// failure as a classified *StoreError.
func (l *Limiter) transact(ctx context.Context, tx TransactAPI, in *dynamodb.TransactWriteItemsInput) ([]types.CancellationReason, error) {
	const op = "TransactWriteItems"
	err := l.gateway(ctx, op, func(ctx context.Context) error {
		_, err := tx.TransactWriteItems(ctx, in, noSDKRetry)
		return err
	})
	var canceled *types.TransactionCanceledException
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &canceled):
		if len(canceled.CancellationReasons) != len(in.TransactItems) {
			return nil, &StoreError{Table: l.table, Op: op, kind: ErrUnavailable,
				Err: fmt.Errorf("transaction canceled with %d reasons for %d items: %w", len(canceled.CancellationReasons), len(in.TransactItems), err)}
		}
		return canceled.CancellationReasons, nil
	}
	return nil, err
}

// learnCancellation reads each item's reason: a failed condition hands back
// the item (ALL_OLD), whose tat is remembered as the store's current value
// (0 for an item that is gone). An item that passed its condition teaches
// nothing. A conflicting transaction is contention (retried with backoff,
// never fed to the breaker); any other reason (throttling) comes back as an
// ErrUnavailable *StoreError, worth another attempt.
func (l *Limiter) learnCancellation(keys []string, reasons []types.CancellationReason) error {
	var other error
	for i, r := range reasons {
		switch code := aws.ToString(r.Code); code {
		case "", "None":
		case "ConditionalCheckFailed":
			if err := l.observeItem(keys[i], r.Item); err != nil {
				return err
			}
		case "TransactionConflict":
			if other == nil {
				other = &conflictError{err: fmt.Errorf("transaction canceled: bucket %q: %s: %s", keys[i], code, aws.ToString(r.Message))}
			}
		default:
			if other == nil {
				other = &StoreError{Table: l.table, Op: "TransactWriteItems", kind: ErrUnavailable,
					Err: fmt.Errorf("transaction canceled: bucket %q: %s: %s", keys[i], code, aws.ToString(r.Message))}
			}
		}
	}
	return other
}
