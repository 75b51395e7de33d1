package limitertest

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// TakeQuota takes n from calendar quota q now, or fails with an
// *limiter.ExhaustedError on limiter.QuotaKey(q.Key) whose RetryAfter
// reaches the window's reset plus id's spread (gcra.Spread), as the
// Limiter's does. Its fault and call are asked under that key.
func (l *Limiter) TakeQuota(ctx context.Context, q limiter.QuotaBucket, n int, id string) (limiter.QuotaGrant, error) {
	key := limiter.QuotaKey(q.Key)
	defer l.answer(ctx, "TakeQuota", key)
	if err := l.ask(Call{Op: "TakeQuota", Key: key, N: n}); err != nil {
		return limiter.QuotaGrant{}, err
	}
	if err := q.Validate(); err != nil {
		return limiter.QuotaGrant{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	d, err := l.decideQuota(q, n, id, now)
	if err != nil {
		return limiter.QuotaGrant{}, err
	}
	l.quotas[key] = d.Next
	return limiter.QuotaGrant{Key: q.Key, Remaining: d.Remaining, Reset: d.Reset}, nil
}

// decideQuota is q's decision on n at now, a denial as the Limiter's
// error.
func (l *Limiter) decideQuota(q limiter.QuotaBucket, n int, id string, now time.Time) (gcra.QuotaDecision, error) {
	d, err := q.Quota.Decide(l.quotas[limiter.QuotaKey(q.Key)], now, n, gcra.Spread(id))
	if err != nil {
		return d, err
	}
	if !d.Allowed {
		return d, &limiter.ExhaustedError{Key: limiter.QuotaKey(q.Key), N: n, RetryAfter: d.RetryAt.Sub(now)}
	}
	return d, nil
}

// TakeWithQuota takes n tokens now from every bucket and n from quota q,
// all or none, as the Limiter's transaction does: a denial is the longest
// wait among the buckets that refuse and the quota. The fault and calls
// are asked for each bucket's key in turn, then the quota's.
func (l *Limiter) TakeWithQuota(ctx context.Context, buckets []limiter.Bucket, q limiter.QuotaBucket, n int, id string) (limiter.MultiReservation, error) {
	if len(buckets) > 0 {
		defer l.answer(ctx, "TakeWithQuota", buckets[0].Key)
	}
	for i, b := range buckets {
		if b.Share != nil {
			return limiter.MultiReservation{}, fmt.Errorf("buckets[%d]: %w", i, &limiter.ArgumentError{Field: "bucket.share",
				Reason: fmt.Sprintf("%q leases shares: such buckets are for single-bucket calls only", b.Key)})
		}
		if err := l.check("TakeWithQuota", b, n, 0); err != nil {
			return limiter.MultiReservation{}, err
		}
	}
	if err := l.ask(Call{Op: "TakeWithQuota", Key: limiter.QuotaKey(q.Key), N: n}); err != nil {
		return limiter.MultiReservation{}, err
	}
	if err := limiter.CheckMulti(buckets, n, 0); err != nil {
		return limiter.MultiReservation{}, err
	}
	if len(buckets)+1 > limiter.MaxMultiBuckets {
		return limiter.MultiReservation{}, &limiter.ArgumentError{Field: "buckets", Reason: fmt.Sprintf("%d and a quota, want at most %d items", len(buckets), limiter.MaxMultiBuckets)}
	}
	if err := q.Validate(); err != nil {
		return limiter.MultiReservation{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	tats, limits, keys := make([]int64, len(buckets)), make([]gcra.Limit, len(buckets)), make([]string, len(buckets))
	for i, b := range buckets {
		tats[i], limits[i], keys[i] = l.state(b.Key).tat, b.Limit, b.Key
	}
	qd, qerr := l.decideQuota(q, n, id, now)
	if qerr != nil && !isExhausted(qerr) {
		return limiter.MultiReservation{}, qerr
	}
	d := gcra.DecideMulti(tats, now.UnixMicro(), limits, n, 0)
	if !d.Allowed {
		denial := &limiter.ExhaustedError{Key: keys[d.Binding], N: n, RetryAfter: micros(d.RetryAfter)}
		if qerr != nil && qerr.(*limiter.ExhaustedError).RetryAfter > denial.RetryAfter {
			return limiter.MultiReservation{}, qerr
		}
		return limiter.MultiReservation{}, denial
	}
	if qerr != nil {
		return limiter.MultiReservation{}, qerr
	}
	for i, k := range keys {
		s := l.state(k)
		s.tat = max(s.tat, d.Slot) + int64(n)*limits[i].Interval()
		s.booked = s.tat
	}
	l.quotas[limiter.QuotaKey(q.Key)] = qd.Next
	return limiter.MultiReservation{Keys: keys, Tokens: n, Slot: time.UnixMicro(d.Slot), Binding: keys[d.Binding]}, nil
}

func isExhausted(err error) bool {
	_, ok := err.(*limiter.ExhaustedError)
	return ok
}
