package limiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/internal/ctxsleep"
)

// Calendar quotas in the store (the math is gcra.Quota).
//
// The item layout: {pk: key␟quota, qw: the window its count belongs to
// (start, Unix s), qn: the count, qc: the tag of the last write, ttl: the
// window's end}. A take of n is one UpdateItem in one of two forms, picked
// without a read:
//
//	same window: SET qn = qn + n  IF qw = w AND qn ≤ count − n
//	new window:  SET qw = w, qn = n  IF qw missing OR qw < w
//
// Every call first tries the same-window form (most calls fall in a window
// already open). Its failed condition hands back the item (ALL_OLD), which
// proves a denial (spent: come back at the reset, spread by the caller's
// id), shows a window to open (the second write), or shows a later window
// than this worker's clock gives (its clock is behind: a denial until that
// window starts). So a grant costs one write, two for the first of a
// window; a denial one.
//
// Both forms set qc to the call's tag and are guarded by NOT
// begins_with(qc, call): a write whose answer was lost is recognised by
// the call's next write, as for buckets, unless another call wrote in
// between; then its n is charged without a grant (never granted twice).
//
// The item expires at the window's end: a deleted item is a fresh window.

// quotaSuffix names a quota's item apart from any bucket's (a bucket key
// may use the shard separator only before a shard number).
const quotaSuffix = ShardSeparator + "quota"

// QuotaKey is the key of the item holding key's calendar quota.
func QuotaKey(key string) string { return key + quotaSuffix }

// QuotaBucket names a calendar quota shared by the fleet and its limit on
// this call.
type QuotaBucket struct {
	Key   string
	Quota gcra.Quota
}

// Validate reports what is wrong with q as an *ArgumentError.
func (q QuotaBucket) Validate() error {
	if err := (Bucket{Key: q.Key, Limit: PerSecond(1, 1)}).Validate(); err != nil {
		return err
	}
	return q.Quota.Validate()
}

// QuotaGrant is a granted take from a quota.
type QuotaGrant struct {
	Key string
	// Remaining is what is left in the window after this take; Reset is
	// the window's end.
	Remaining int
	Reset     time.Time
}

// quotaInput is write number i of call for a take of n at now: the
// same-window form when open, else the new-window form.
func (l *Limiter) quotaInput(q QuotaBucket, open bool, window, end int64, n int, call callTag, i int) *dynamodb.UpdateItemInput {
	names := map[string]string{"#w": "qw", "#n": "qn", "#c": "qc", "#ttl": TTLAttribute}
	values := map[string]types.AttributeValue{
		":w": num(window), ":n": num(int64(n)), ":ttl": num(end), ":cid": str(call.write(i)), ":call": str(call.id),
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{KeyAttribute: str(QuotaKey(q.Key))},
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	in.ReturnValues = types.ReturnValueAllNew
	if open {
		values[":limit"] = num(int64(q.Quota.Count - n))
		in.UpdateExpression = aws.String("SET #n = #n + :n, #c = :cid, #ttl = :ttl")
		in.ConditionExpression = aws.String("#w = :w AND #n <= :limit AND NOT begins_with(#c, :call)")
		return in
	}
	in.UpdateExpression = aws.String("SET #w = :w, #n = :n, #c = :cid, #ttl = :ttl")
	in.ConditionExpression = aws.String("(attribute_not_exists(#w) OR #w < :w) AND NOT begins_with(#c, :call)")
	return in
}

func (l *Limiter) quotaTransactItem(q QuotaBucket, open bool, window, end int64, n int, call callTag, i int) types.TransactWriteItem {
	in := l.quotaInput(q, open, window, end, n, call, i)
	return types.TransactWriteItem{Update: &types.Update{
		TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression, ConditionExpression: in.ConditionExpression,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// quotaItem reads a quota item: its state and the tag of its last write.
func quotaItem(item map[string]types.AttributeValue) (gcra.QuotaState, string, error) {
	var st gcra.QuotaState
	if v, ok := item["qw"].(*types.AttributeValueMemberN); ok {
		w, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return st, "", fmt.Errorf("attribute qw: %w", err)
		}
		st.Window = w
	}
	if v, ok := item["qn"].(*types.AttributeValueMemberN); ok {
		n, err := strconv.Atoi(v.Value)
		if err != nil {
			return st, "", fmt.Errorf("attribute qn: %w", err)
		}
		st.Used = n
	}
	tag, _ := item["qc"].(*types.AttributeValueMemberS)
	if tag == nil {
		return st, "", nil
	}
	return st, tag.Value, nil
}

// quotaNext is what the state a failed condition handed back says to do:
// deny (with the wait), or write again in the form it shows.
func quotaNext(q QuotaBucket, st gcra.QuotaState, now time.Time, n int, id string) (open bool, deny error) {
	start, _ := q.Quota.Window(now)
	if st.Window > start.Unix() {
		// The fleet opened a window this worker's clock has not reached.
		wait := time.Unix(st.Window, 0).Sub(now) + gcra.Spread(id)
		return false, &ExhaustedError{Key: QuotaKey(q.Key), N: n, RetryAfter: wait}
	}
	d, err := q.Quota.Decide(st, now, n, gcra.Spread(id))
	if err != nil {
		return false, err
	}
	if !d.Allowed {
		return false, &ExhaustedError{Key: QuotaKey(q.Key), N: n, RetryAfter: d.RetryAt.Sub(now)}
	}
	return st.Window == start.Unix(), nil
}

// landedQuota returns the index of this call's write a quota item carries.
func landedQuota(call callTag, tag string) (int, bool) {
	if !strings.HasPrefix(tag, call.id) {
		return 0, false
	}
	i, err := strconv.Atoi(strings.TrimPrefix(tag, call.id))
	return i, err == nil
}

// TakeQuota takes n from calendar quota q now, or fails with an
// *ExhaustedError whose RetryAfter reaches the window's reset plus id's
// offset in the first minute after it (gcra.Spread): pass the job's id, so
// the fleet's deferred jobs come back over that minute and a redelivered
// job comes back at the same time. One conditional write per grant (two
// for the first of a window), one per denial.
func (l *Limiter) TakeQuota(ctx context.Context, q QuotaBucket, n int, id string) (QuotaGrant, error) {
	if err := q.Validate(); err != nil {
		return QuotaGrant{}, err
	}
	if n > q.Quota.Count || n < 1 {
		_, err := q.Quota.Decide(gcra.QuotaState{}, l.now(), n, 0)
		return QuotaGrant{}, err
	}
	call := newCallTag()
	open := true
	var lastErr error
	for writes := 0; ; writes++ {
		if writes == l.attempts+1 {
			if lastErr != nil {
				return QuotaGrant{}, lastErr
			}
			return QuotaGrant{}, &ContendedError{Key: QuotaKey(q.Key), Writes: writes}
		}
		if err := ctx.Err(); err != nil {
			return QuotaGrant{}, err
		}
		now := l.now()
		start, end := q.Quota.Window(now)
		out, err := l.updateItem(ctx, l.quotaInput(q, open, start.Unix(), end.Unix(), n, call, writes), noSDKRetry)
		if err == nil {
			st, _, perr := quotaItem(out.Attributes)
			if perr != nil {
				return QuotaGrant{}, &StoreError{Table: l.table, Op: "UpdateItem", kind: ErrUnavailable, Err: perr}
			}
			return QuotaGrant{Key: q.Key, Remaining: q.Quota.Count - st.Used, Reset: end}, nil
		}
		item, failed := conditionFailed(err)
		if !failed {
			lastErr = err
			if !errors.Is(err, ErrUnavailable) && !isConflict(err) || errors.Is(err, breaker.ErrOpen) {
				return QuotaGrant{}, err
			}
			if err := ctxsleep.Sleep(ctx, backoff(writes+1)); err != nil {
				return QuotaGrant{}, lastErr
			}
			continue
		}
		lastErr = nil
		st, tag, perr := quotaItem(item)
		if perr != nil {
			return QuotaGrant{}, &StoreError{Table: l.table, Op: "UpdateItem", kind: ErrUnavailable, Err: perr}
		}
		if _, ours := landedQuota(call, tag); ours {
			// An earlier write of this call landed; its answer was lost.
			return QuotaGrant{Key: q.Key, Remaining: max(q.Quota.Count-st.Used, 0), Reset: end}, nil
		}
		var deny error
		if open, deny = quotaNext(q, st, now, n, id); deny != nil {
			return QuotaGrant{}, deny
		}
	}
}

// TakeWithQuota takes n tokens now from every bucket and n from quota q,
// in one TransactWriteItems: all are charged or none, so a request the
// rate limits refuse spends no quota, and one the quota refuses spends no
// token. A denial is an *ExhaustedError: the longest wait among the
// buckets that refuse and the quota (its reset plus id's spread). Cost:
// one transaction of len(buckets)+1 items (2 write units each), one more
// when a bucket's form or the quota's window has to be corrected from the
// cancellation's ALL_OLD. Buckets are as for TakeMulti (no adaptive ones).
func (l *Limiter) TakeWithQuota(ctx context.Context, buckets []Bucket, q QuotaBucket, n int, id string) (MultiReservation, error) {
	for i, b := range buckets {
		if b.Share != nil {
			return MultiReservation{}, fmt.Errorf("buckets[%d]: %w", i, &ArgumentError{Field: "bucket.share",
				Reason: fmt.Sprintf("%q leases shares: such buckets are for single-bucket calls only", b.Key)})
		}
		if b.Adaptive != nil {
			// A transaction hands back no new values to learn a rate from.
			return MultiReservation{}, fmt.Errorf("buckets[%d]: %w", i, &ArgumentError{Field: "bucket.adaptive",
				Reason: fmt.Sprintf("%q is adaptive: a quota composes with fixed limits only (take the quota with TakeQuota beside it)", b.Key)})
		}
	}
	if err := CheckMulti(buckets, n, 0); err != nil {
		return MultiReservation{}, err
	}
	if len(buckets)+1 > MaxMultiBuckets {
		return MultiReservation{}, &ArgumentError{Field: "buckets", Reason: fmt.Sprintf("%d and a quota, want at most %d items", len(buckets), MaxMultiBuckets)}
	}
	if err := q.Validate(); err != nil {
		return MultiReservation{}, err
	}
	if _, err := q.Quota.Decide(gcra.QuotaState{}, l.now(), n, 0); err != nil {
		return MultiReservation{}, err
	}
	tx, ok := l.db.(TransactAPI)
	if !ok {
		return MultiReservation{}, fmt.Errorf("%w: %T", ErrNoTransactions, l.db)
	}
	limits := make([]Limit, len(buckets))
	keys := make([]string, len(buckets))
	for i, b := range buckets {
		limits[i], keys[i] = b.Limit, b.Key
	}
	call := newCallTag()
	now := micros(l.now())
	tats := make([]int64, len(buckets))
	for i, k := range keys {
		tats[i], _ = l.seen.get(k, now, l.cacheAge.Microseconds())
	}
	type sentTx struct {
		d    gcra.MultiDecision
		tats []int64
		now  int64
	}
	var (
		writes  []sentTx
		lastErr error
		open    = true
	)
	attempts := l.attempts + len(buckets)
	for {
		d := gcra.DecideMulti(tats, now, limits, n, 0)
		if !d.Allowed {
			// Tats only grow, so a denial against what this call saw holds;
			// a stale one is confirmed by the transaction below instead.
			if len(writes) > 0 {
				return MultiReservation{}, &ExhaustedError{Key: keys[d.Binding], N: n, RetryAfter: l.retryAfter(now, d.RetryAfter, true)}
			}
			d = gcra.DecideMulti(make([]int64, len(buckets)), now, limits, n, 0)
		}
		if len(writes) == attempts {
			if lastErr != nil {
				return MultiReservation{}, lastErr
			}
			return MultiReservation{}, &ContendedError{Key: QuotaKey(q.Key), Writes: len(writes)}
		}
		if err := ctx.Err(); err != nil {
			return MultiReservation{}, err
		}
		at := time.UnixMicro(now)
		start, end := q.Quota.Window(at)
		items := l.bucketItems(buckets, limits, tats, now, n, 0, d, call, len(writes))
		items = append(items, l.quotaTransactItem(q, open, start.Unix(), end.Unix(), n, call, len(writes)))
		writes = append(writes, sentTx{d: d, tats: append([]int64(nil), tats...), now: now})
		reasons, err := l.transact(ctx, tx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil && reasons == nil {
			return l.grantedMulti(keys, limits, n, now, d, tats), nil
		}
		if err == nil {
			qr := reasons[len(buckets)]
			st, tag, perr := quotaItem(qr.Item)
			if w, ours := landedMulti(call, reasons[:len(buckets)]); ours && w < len(writes) {
				return l.grantedMulti(keys, limits, n, writes[w].now, writes[w].d, writes[w].tats), nil
			}
			if w, ours := landedQuota(call, tag); ours && w < len(writes) {
				return l.grantedMulti(keys, limits, n, writes[w].now, writes[w].d, writes[w].tats), nil
			}
			if err = l.learnCancellation(keys, reasons[:len(buckets)]); err == nil && perr != nil {
				err = &StoreError{Table: l.table, Op: "TransactWriteItems", kind: ErrUnavailable, Err: perr}
			}
			for i, r := range reasons[:len(buckets)] {
				if aws.ToString(r.Code) == "ConditionalCheckFailed" {
					tats[i], _ = itemTAT(r.Item)
				}
			}
			if err == nil && aws.ToString(qr.Code) == "ConditionalCheckFailed" {
				var deny error
				if open, deny = quotaNext(q, st, at, n, id); deny != nil {
					if bd := gcra.DecideMulti(tats, now, limits, n, 0); !bd.Allowed {
						// Both refuse: the request fits when both allow it.
						var ex *ExhaustedError
						if errors.As(deny, &ex) && time.Duration(bd.RetryAfter)*time.Microsecond > ex.RetryAfter {
							return MultiReservation{}, &ExhaustedError{Key: keys[bd.Binding], N: n, RetryAfter: l.retryAfter(now, bd.RetryAfter, true)}
						}
					}
					return MultiReservation{}, deny
				}
			}
			if err == nil {
				lastErr = nil
				continue
			}
		}
		var stop error
		if lastErr, _, stop = l.storeRetry(ctx, err, len(writes), attempts); stop != nil {
			return MultiReservation{}, stop
		}
		if len(writes) < attempts {
			now = micros(l.now())
		}
	}
}
