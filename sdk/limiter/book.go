package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/internal/ctxsleep"
)

// grant is a successful write: the reservation, and the tat and now it was
// made with, from which a batch's slots follow.
type grant struct {
	Reservation
	tat, now int64
	lim      Limit        // the effective limit of the write
	ch       gcra.Charged // and what it charged (a probation spaces it)
}

// sent is what one write of a call asked for, to rebuild its grant when a
// later write finds it landed.
type sent struct {
	n   int
	now int64
	lim Limit        // the effective limit it was decided with
	st  AdaptState   // and the adaptive state that limit came from
	ch  gcra.Charged // and what it charged
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
func (l *Limiter) book(ctx context.Context, b Bucket, size func(tat, now int64, lim Limit, spacing int64) int, maxDelay time.Duration) (grant, error) {
	return l.bookAhead(ctx, b, size, maxDelay, 0, false)
}

// bookAhead is book with its writes claiming the time `ahead` from now
// (at most maxDelay, of which it takes its share), so that every slot it
// grants lies at least that far ahead: Wait's booking after a grant the
// store answered too late to spend, so that a write as slow again is
// answered before its slot. A write claiming a later now only forgoes the
// refill until then: the bucket's bound on slots holds whatever the nows
// its writes claim (each grant leaves tat at least T past its slot, and
// tat never goes back), and Wait sleeps until the slot by this clock.
//
// requests says whether the n tokens are n requests (a batch's slots) or
// one request's cost: on a bucket on probation (gcra.Probation), a batch's
// slots are spaced, and either is charged the spaced time (gcra.ChargeOf).
func (l *Limiter) bookAhead(ctx context.Context, b Bucket, size func(tat, now int64, lim Limit, spacing int64) int, maxDelay, ahead time.Duration, requests bool) (grant, error) {
	ahead = min(max(ahead, 0), maxDelay)
	delay := (maxDelay - ahead).Microseconds()
	call := newCallTag()
	now := micros(l.now()) + ahead.Microseconds()
	tat, booked, fresh := l.seen.lookup(b.Key, now, l.cacheAge.Microseconds())
	current := false // tat is what the store handed back to this call
	attempts := l.attempts
	if b.Share != nil {
		// A process new to a bucket with shares may guess its mark and
		// its leases wrong once each.
		attempts += 2
	}
	var (
		writes    []sent
		lastErr   error // the last store error, if the last write had one
		contended error // the last conflicting transaction, if any
	)
	for {
		// An adaptive bucket's limit is recomputed each time round: a
		// failed condition may have handed back a newer state.
		lim, st := l.effective(b, now)
		var (
			sf shareForm
			sv shareView
		)
		if b.Share != nil {
			lim, sf, sv = l.shareDecision(b, tat, now, size(tat, now, b.Limit, 1) == 1)
		}
		T, tau := lim.Interval(), lim.Tolerance()
		spacing := l.spacing(b, now)
		n := size(tat, now, lim, spacing)
		ch := gcra.ChargeOf(lim, n, spacing, requests, delay)
		d := gcra.Decide(tat, now, lim, ch.Span, delay)
		if !d.Allowed && l.final(tat, booked, now, d.RetryAfter, fresh, current) {
			return grant{}, &ExhaustedError{Key: b.Key, N: n, RetryAfter: l.retryAfter(now, d.RetryAfter, len(writes) > 0 || ahead > 0)}
		}
		// Any other denial is confirmed by a write: the busy form below
		// cannot pass unless tat went backwards (a reset), and its failed
		// condition hands back the current item.
		if len(writes) == attempts {
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
		// The write is bounded by the last slot (the span) and charges
		// what the probation asks, so it may leave tat past that slot.
		spanT := int64(ch.Span) * T
		in := l.takeInput(b.Key, f, now, ch.Charge, now+tau-spanT+delay, adaptTTL(b, st, now+tau+delay+ch.Charge-spanT), call, len(writes))
		if b.Adaptive != nil {
			withVersion(in, st.Version)
		}
		if b.Share != nil {
			shareInput(in, f, sf, sv, *b.Share, now)
		}
		writes = append(writes, sent{n: n, now: now, lim: lim, st: st, ch: ch})
		at := micros(l.now())
		out, err := l.updateItem(ctx, in, noSDKRetry)
		if err == nil {
			l.learnSilence(b.Key, out.Attributes, at)
			if b.Share != nil {
				l.shares.learn(b.Key, out.Attributes)
				l.shares.wroteForm(sf, sv)
				if sf == lease {
					l.shares.took(b.Key, *b.Share, b.Limit, now)
				}
			}
			return l.granted(b, lim, st, n, now, out.Attributes, ch)
		}
		if item, failed := conditionFailed(err); failed {
			if b.Share != nil {
				why := failedWhy(f, sf, sv, b.Share.Leases, item, now, now+tau-spanT+delay)
				l.shares.count(&l.shares.failed, why+" ("+sf.String()+")", 1)
				l.shares.learn(b.Key, item)
			}
			if i, left, ours := call.landed(item); ours && i < len(writes) {
				// An earlier write of this call landed and its answer was
				// lost; its lane says what tat it left.
				if cur, err := itemTAT(item); err == nil {
					bk, _ := itemBooked(item)
					l.seen.set(b.Key, cur, bk, micros(l.now()))
				}
				w := writes[i]
				return l.grantedTAT(b, w.lim, w.st, w.n, w.now, left, w.ch), nil
			}
			if tat, err = l.learnItem(b.Key, item); err != nil {
				return grant{}, err
			}
			current, lastErr = true, nil
			continue
		}
		var stop error
		if lastErr, contended, stop = l.storeRetry(ctx, err, len(writes), attempts); stop != nil {
			return grant{}, stop
		}
		if len(writes) < attempts {
			// Paused: a fresh now, so that the next write claims the time
			// it is sent at. The tat seen stays (it is still a lower bound).
			now = micros(l.now()) + ahead.Microseconds()
		}
	}
}

// storeRetry is how a call goes on after its write number `wrote` failed
// with err, a store error rather than a failed condition. A conflicting
// transaction is contention: it comes back as contended, not as the
// call's last error. An unavailable store is worth another attempt: it
// comes back as last. Anything else ends the call (stop), as does ctx
// ending during the backoff it sleeps while attempts are left, which
// stops with the last store error if there is one.
func (l *Limiter) storeRetry(ctx context.Context, err error, wrote, attempts int) (last, contended, stop error) {
	switch {
	case isConflict(err):
		contended = errors.Unwrap(err)
	case !errors.Is(err, ErrUnavailable) || errors.Is(err, breaker.ErrOpen):
		return nil, nil, err
	default:
		last = err
	}
	if wrote == attempts {
		return last, contended, nil
	}
	if serr := ctxsleep.Sleep(ctx, backoff(wrote)); serr != nil {
		if last != nil {
			return last, contended, last
		}
		return last, contended, serr
	}
	return last, contended, nil
}

// bucketItems is the transaction item of each bucket for a multi-bucket
// decision d made at now, write number i of call: each charged at the
// common slot (gcra.MultiDecision.Slot), the busy form where the tat seen
// (forms) runs ahead of it, each bounded by d.Bounds, and each charged
// what its probation asks (spacing, gcra.ChargeOf: admitted as before,
// tat only pushed further).
func (l *Limiter) bucketItems(buckets []Bucket, limits []Limit, forms []int64, now int64, n int, delay int64, d gcra.MultiDecision, call callTag, i int) []types.TransactWriteItem {
	at := max(d.Slot, now)
	items := make([]types.TransactWriteItem, len(buckets), len(buckets)+1)
	for k, lim := range limits {
		f := idle
		if forms[k] > at {
			f = busy
		}
		ch := gcra.ChargeOf(lim, n, l.spacing(buckets[k], now), false, delay)
		extra := ch.Charge - int64(n)*lim.Interval()
		items[k] = l.transactItem(buckets[k].Key, f, at, ch.Charge, d.Bounds[k], ttlSeconds(now+lim.Tolerance()+delay+extra), call, i)
	}
	return items
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

func (l *Limiter) granted(b Bucket, lim Limit, st AdaptState, n int, now int64, item map[string]types.AttributeValue, ch gcra.Charged) (grant, error) {
	tat, err := itemTAT(item)
	if err != nil || tat == 0 {
		return grant{}, &StoreError{Table: l.table, Op: "UpdateItem", kind: ErrUnavailable,
			Err: fmt.Errorf("write succeeded but returned no valid tat (err %v): is ReturnValues=ALL_NEW honoured?", err)}
	}
	l.seen.book(b.Key, tat, micros(l.now()))
	return l.grantedTAT(b, lim, st, n, now, tat, ch), nil
}

// grantedTAT is the grant of n tokens by a write made at now, with the
// effective limit lim from adaptive state st, that charged ch and left
// tat: its slot is the last of its span after the tat it started from.
func (l *Limiter) grantedTAT(b Bucket, lim Limit, st AdaptState, n int, now, tat int64, ch gcra.Charged) grant {
	slot := max(tat-ch.Charge+int64(ch.Span)*lim.Interval()-lim.Tolerance(), now)
	r := Reservation{Key: b.Key, Tokens: n, Slot: time.UnixMicro(slot), Remaining: gcra.Remaining(tat, now, lim),
		Rate: lim.Rate, adaptive: b.Adaptive != nil, version: st.Version, interval: lim.Interval(),
		probing: b.Adaptive != nil && b.Adaptive.Climbing(st, b.Limit, now)}
	return grant{Reservation: r, tat: tat, now: now, lim: lim, ch: ch}
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
	l.learnSilence(key, item, micros(l.now()))
	return tat, nil
}

// observeItem learns from the item a failed condition returned.
func (l *Limiter) observeItem(key string, item map[string]types.AttributeValue) error {
	_, err := l.learnItem(key, item)
	return err
}
