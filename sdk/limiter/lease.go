package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/breaker"
	"github.com/fleetbucket/fleetbucket/sdk/internal/ctxsleep"
)

// Fleet-wide in-flight leases (max_in_flight).
//
// A vendor that allows N concurrent requests per credential counts what is
// in flight at its end, whichever process sent it. A push therefore holds a
// lease from just before its request until its answer, and the fleet never
// holds more than N leases of one (credential, endpoint).
//
// The item layout. One item per lease set, apart from the bucket's item:
// {pk: key␟inflight, ttl, p (how long the last push released held its
// lease, µs), and per slot i < MaxLeases the attributes e<i> (the lease's
// expiry, Unix µs), o<i> (the holder's random id) and a<i> (when it was
// acquired, Unix µs)}. A slot is free when e<i> is missing or e<i> ≤ now.
//
// Acquire is one UpdateItem on slot s:
//
//	SET e<s> = now + hold, o<s> = me, a<s> = now, ttl = …
//	IF (e<s> missing OR e<s> ≤ now) AND (for every slot j ≥ max: e<j> missing OR e<j> ≤ now)
//
// The first clause takes a free or expired slot; the second makes max a
// bound however max changed: slots at or above a lowered max must drain
// before anyone acquires again, so live leases ≤ max at every instant (with
// max the lowest any acquirer passes). Slots below max are at most max, so
// together at most max leases are live.
//
// Which slot, without a read: a random one below max. If it is taken the
// condition fails and ALL_OLD hands back the whole item, which either shows a
// free slot (the second write takes it) or proves that none is free and when
// the earliest one expires. The caller asks again then, or after
// InFlight.Timeout if that is sooner (a push keeps its lease at most that
// long, and a Hold far above it is only the crash bound): no polling
// faster than one push's time (LeaseBusyError.Recheck). A caller that
// defers its work comes back sooner, when a held slot's push is likely
// over (RetryAfter): its a<s> plus p, the time the last push released
// took (a push of the same vendor takes about as long as the last). A
// slot whose likely end has passed was passed on in its process with no
// write (LeaseGate), or its push runs long: nothing says when it frees,
// and the job comes back after p. A lost answer
// is recognised the same way: the next write's ALL_OLD carries our own id.
//
// Release is one UpdateItem: REMOVE e<s>, o<s>, a<s> SET p IF o<s> = me, so
// a push never frees a slot that expired and was taken by someone else,
// and the item learns how long a push holds a lease with the write it
// makes anyway (a hand-over sets p too; a pass with no write does not). A push
// costs two writes (acquire, release); a lease passed to a waiter of the same
// process (LeaseGate) costs one for both (release + acquire in one SET).
//
// Expiry is the crash bound: a worker that dies mid-push leaves its lease
// until now + hold, never longer, and nothing needs to clean it up. The
// expiry is computed from the acquirer's clock before the write: a clock δ
// ahead of the others' frees its leases δ early for them, so keep clocks
// synchronized as for buckets. The push must end (its HTTP deadline) by
// Lease.Expires, which the caller enforces (context.WithDeadline).
//
// TTL: the item may be deleted only when every lease in it has expired. A
// live lease expires at most MaxLeaseHold after it was acquired, so
// ttl = now + hold + MaxLeaseHold, written by every acquire, is after every
// live lease's expiry (acquired at a' ≤ now, expiring at
// a' + hold' ≤ now + MaxLeaseHold).
//
// Size: a slot is about 40 bytes (three names, two numbers, a 13-character
// id), so MaxLeases = 20 keeps the item under 1 KB and each write at 1 write
// unit.

// MaxLeases is the largest max_in_flight: the slots one lease item has.
const MaxLeases = 20

// MaxLeaseHold is the longest a lease may last (InFlight.Hold).
const MaxLeaseHold = 15 * time.Minute

// leaseSuffix names a key's lease item. A bucket key may use the shard
// separator only before a shard number, so no bucket's item is named this.
const leaseSuffix = ShardSeparator + "inflight"

// LeaseKey is the key of the item holding key's leases.
func LeaseKey(key string) string { return key + leaseSuffix }

// InFlight is a fleet-wide bound on concurrent requests: at most Max
// leases of Key at once, each lasting at most Hold unless released.
type InFlight struct {
	// Key names the lease set, typically the bucket's key (credential and
	// endpoint); the leases live in their own item.
	Key string
	// Max is the most leases held at once, 1 to MaxLeases.
	Max int
	// Hold is how long a lease lasts unless released first: at least the
	// push's timeout plus the time to start it. A worker that dies mid-push
	// frees its lease after Hold. At most MaxLeaseHold.
	Hold time.Duration
	// Timeout is the longest one push keeps the lease (its HTTP timeout);
	// 0 means Hold. With Timeout below Hold, LeaseGate passes a lease
	// between pushes of its process with no write while at least Timeout
	// of it remains, so a saturated process writes once per about
	// (Hold − Timeout) ÷ latency pushes, for a crash bound of Hold instead
	// of Timeout.
	Timeout time.Duration
}

// need is how much of a lease one push needs left.
func (f InFlight) need() time.Duration {
	if f.Timeout > 0 {
		return f.Timeout
	}
	return f.Hold
}

// Validate reports what is wrong with f as an *ArgumentError naming the
// field.
func (f InFlight) Validate() error {
	if err := (Bucket{Key: f.Key, Limit: PerSecond(1, 1)}).Validate(); err != nil {
		return err
	}
	switch {
	case f.Max < 1 || f.Max > MaxLeases:
		return &ArgumentError{Field: "max_in_flight", Reason: fmt.Sprintf("%d, want 1 to %d (limiter.MaxLeases)", f.Max, MaxLeases)}
	case f.Hold <= 0 || f.Hold > MaxLeaseHold:
		return &ArgumentError{Field: "hold", Reason: fmt.Sprintf("%v, want > 0 and at most %v (limiter.MaxLeaseHold): the push's timeout", f.Hold, MaxLeaseHold)}
	case f.Timeout < 0 || f.Timeout > f.Hold:
		return &ArgumentError{Field: "timeout", Reason: fmt.Sprintf("%v, want 0 (= hold) to hold %v: a push must end before its lease does", f.Timeout, f.Hold)}
	}
	return nil
}

// Lease is one held slot of an InFlight set.
type Lease struct {
	Key   string // InFlight.Key
	Slot  int
	Owner string // random, unique per acquire
	// Acquired is the holder's clock when its push took the slot (a
	// LeaseGate passing a lease on with no write sets it anew: the release
	// records how long the push held it). Expires is when the slot frees
	// itself: the push must be over by then (its deadline is the earlier
	// of Expires and now + its timeout).
	Acquired, Expires time.Time
}

// Deadline is when a push that starts at now under the lease must end:
// now + timeout, or Expires if sooner (timeout ≤ 0: Expires). Set it on
// the request's context so the push never outlives its lease.
func (l Lease) Deadline(now time.Time, timeout time.Duration) time.Time {
	if d := now.Add(timeout); timeout > 0 && d.Before(l.Expires) {
		return d
	}
	return l.Expires
}

// LeaseBusyError is an acquire that found no free slot. RetryAfter is when
// to ask again: the earliest expiry among the held slots (and, after max
// was lowered, the latest among the slots above it), or, when that is
// further off, the InFlight's Timeout (its Hold when 0), or, sooner still,
// when the first held slot's push is likely over (its acquisition plus
// the last released push's time; one push's time from now when every such
// end has passed). The expiry is the crash bound; a live push keeps its
// lease at most its Timeout and then releases it, so by then every push
// now under a lease has ended, and its slot is free unless its process
// passed it to a push of its own (LeaseGate). LeaseGate passes a release
// of its process to its waiters at once.
//
// It matches ErrExhausted and unwraps to an *ExhaustedError, so RetryAfter
// and a caller's deferral treat it like an empty bucket.
type LeaseBusyError struct {
	Key        string
	Max, Held  int
	RetryAfter time.Duration
	// Recheck is when a waiter that stays (LeaseGate) asks again: the
	// earliest expiry or the Timeout bound, never a push's likely end.
	// Its process's waiters take the slots its own pushes release; a
	// waiter that asked at every likely end would pay a failed write for
	// most pushes of the other processes, which pass their slots on
	// within their process.
	Recheck time.Duration
}

func (e *LeaseBusyError) Error() string {
	return fmt.Sprintf("fleetbucket: %d of %d in-flight leases of %q held: retry after %v", e.Held, e.Max, e.Key, e.RetryAfter)
}

func (e *LeaseBusyError) Unwrap() error {
	return &ExhaustedError{Key: LeaseKey(e.Key), N: 1, RetryAfter: e.RetryAfter}
}

// ErrLeaseLost: a release (or a hand-over) found the slot no longer ours:
// the lease expired and, possibly, someone else took it. The push outlived
// its hold: raise Hold or lower the push's timeout.
var ErrLeaseLost = errors.New("fleetbucket: lease expired before its release")

// pushAttribute is the lease item's attribute holding how long the last
// push released held its lease (µs).
const pushAttribute = "p"

func leaseNames(slot int) map[string]string {
	s := strconv.Itoa(slot)
	return map[string]string{"#e": "e" + s, "#o": "o" + s, "#a": "a" + s, "#ttl": TTLAttribute}
}

// pushTime is how long lease's push held it, released at now (µs), or 0
// when the clock says nothing of it.
func pushTime(lease Lease, now int64) int64 {
	if lease.Acquired.IsZero() {
		return 0
	}
	return max(now-micros(lease.Acquired), 0)
}

// highSlotsFree adds to names and returns the clause that every slot at or
// above max is free at :now.
func highSlotsFree(names map[string]string, max int) string {
	var b strings.Builder
	for j := max; j < MaxLeases; j++ {
		n := "#h" + strconv.Itoa(j)
		names[n] = "e" + strconv.Itoa(j)
		fmt.Fprintf(&b, " AND (attribute_not_exists(%s) OR %s <= :now)", n, n)
	}
	return b.String()
}

func (l *Limiter) leaseItemKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{KeyAttribute: str(LeaseKey(key))}
}

// acquireInput takes slot for owner at now, until exp. With prev set it is
// a hand-over: the slot must be prev's (held or expired but not retaken)
// instead of free, and push (> 0) is how long prev's push held it.
func (l *Limiter) acquireInput(f InFlight, slot int, owner, prev string, now, exp, push int64) *dynamodb.UpdateItemInput {
	names := leaseNames(slot)
	cond := "(attribute_not_exists(#e) OR #e <= :now)"
	values := map[string]types.AttributeValue{
		":now": num(now), ":exp": num(exp), ":me": str(owner),
		":ttl": num(ttlSeconds(exp + MaxLeaseHold.Microseconds())),
	}
	update := "SET #e = :exp, #o = :me, #a = :now, #ttl = :ttl"
	if prev != "" {
		cond = "#o = :prev"
		values[":prev"] = str(prev)
	}
	if push > 0 {
		update += ", #p = :p"
		names["#p"], values[":p"] = pushAttribute, num(push)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 l.leaseItemKey(f.Key),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond + highSlotsFree(names, f.Max)),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// leaseSlots reads the slots of a lease item: expiry (0 when free),
// owner and acquisition time, by slot.
type leaseSlot struct {
	exp, at int64
	owner   string
}

func leaseSlots(item map[string]types.AttributeValue) [MaxLeases]leaseSlot {
	var out [MaxLeases]leaseSlot
	for i := range out {
		s := strconv.Itoa(i)
		if v, ok := item["e"+s].(*types.AttributeValueMemberN); ok {
			out[i].exp, _ = strconv.ParseInt(v.Value, 10, 64)
		}
		if v, ok := item["a"+s].(*types.AttributeValueMemberN); ok {
			out[i].at, _ = strconv.ParseInt(v.Value, 10, 64)
		}
		if v, ok := item["o"+s].(*types.AttributeValueMemberS); ok {
			out[i].owner = v.Value
		}
	}
	return out
}

// itemPush is the lease item's p: how long the last push released held
// its lease (µs), 0 when none was.
func itemPush(item map[string]types.AttributeValue) int64 {
	v, ok := item[pushAttribute].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	p, _ := strconv.ParseInt(v.Value, 10, 64)
	return max(p, 0)
}

// leaseDecision is what an item a failed condition returned says to do
// next: take a free slot (slot ≥ 0), or wait (the busy error). push is
// the item's p (0: unknown).
func leaseDecision(f InFlight, slots [MaxLeases]leaseSlot, now, push int64) (slot int, busy *LeaseBusyError) {
	var free []int
	held, earliest, highLatest := 0, int64(0), int64(0)
	for i, s := range slots {
		live := s.exp > now
		switch {
		case i >= f.Max && live:
			highLatest = max(highLatest, s.exp)
			held++
		case i >= f.Max:
		case !live:
			free = append(free, i)
		default:
			held++
			if earliest == 0 || s.exp < earliest {
				earliest = s.exp
			}
		}
	}
	if highLatest == 0 && len(free) > 0 {
		return free[rand.IntN(len(free))], nil
	}
	until := highLatest
	if len(free) == 0 {
		until = max(until, earliest)
	}
	// Every push under a live lease now ends within f's Timeout, and its
	// release frees the slot then, unless its process passes the slot to a
	// push of its own: asking no later than that keeps a Hold far above
	// the Timeout (the crash bound) from becoming the wait of a slot that
	// a healthy push freed long before.
	until = min(until, now+f.need().Microseconds())
	recheck := until
	if push > 0 && highLatest == 0 {
		until = min(until, likelyEnd(slots[:f.Max], now, push))
	}
	return -1, &LeaseBusyError{Key: f.Key, Max: f.Max, Held: held,
		RetryAfter: time.Duration(until-now) * time.Microsecond, Recheck: time.Duration(recheck-now) * time.Microsecond}
}

// likelyEnd is when the first push under a live slot of slots is likely
// over: its acquisition plus push, the last released push's time. A slot
// past that was passed on with no write or runs long, and says nothing of
// when it frees: with every slot so, one push's time from now.
func likelyEnd(slots []leaseSlot, now, push int64) int64 {
	end := now + push
	for _, s := range slots {
		if e := s.at + push; s.exp > now && e > now {
			end = min(end, e)
		}
	}
	return end
}

// AcquireLease takes one of f's slots now, or fails with a
// *LeaseBusyError (matching ErrExhausted) carrying the exact time until one
// expires. It costs one conditional write when the random slot it tries is
// free, two when ALL_OLD shows another free one, and one to learn that none
// is free. Store failures are typed as for Take; a call whose every write
// lost a race for a slot that others took meanwhile ends in ErrContended.
func (l *Limiter) AcquireLease(ctx context.Context, f InFlight) (Lease, error) {
	if err := f.Validate(); err != nil {
		return Lease{}, err
	}
	owner := newCallTag().id
	slot := rand.IntN(f.Max)
	var lastErr error
	for writes := 0; ; {
		if writes == l.attempts+1 {
			if lastErr != nil {
				return Lease{}, lastErr
			}
			return Lease{}, &ContendedError{Key: LeaseKey(f.Key), Writes: writes}
		}
		if err := ctx.Err(); err != nil {
			return Lease{}, err
		}
		now := micros(l.now())
		exp := now + f.Hold.Microseconds()
		writes++
		_, err := l.updateItem(ctx, l.acquireInput(f, slot, owner, "", now, exp, 0), noSDKRetry)
		if err == nil {
			return Lease{Key: f.Key, Slot: slot, Owner: owner, Acquired: time.UnixMicro(now), Expires: time.UnixMicro(exp)}, nil
		}
		item, failed := conditionFailed(err)
		if !failed {
			lastErr = err
			if !errors.Is(err, ErrUnavailable) && !isConflict(err) || errors.Is(err, breaker.ErrOpen) {
				return Lease{}, err
			}
			if err := ctxsleep.Sleep(ctx, backoff(writes)); err != nil {
				return Lease{}, lastErr
			}
			continue
		}
		lastErr = nil
		slots := leaseSlots(item)
		for i, s := range slots {
			if s.owner == owner {
				// An earlier write of this call landed; its answer was lost.
				return Lease{Key: f.Key, Slot: i, Owner: owner, Acquired: time.UnixMicro(s.at), Expires: time.UnixMicro(s.exp)}, nil
			}
		}
		next, busy := leaseDecision(f, slots, now, itemPush(item))
		if busy != nil {
			return Lease{}, busy
		}
		slot = next
	}
}

// ReleaseLease frees lease's slot: one conditional write, which does
// nothing but report ErrLeaseLost when the lease had expired and someone
// else took the slot. Releasing twice is harmless and reports nothing: a
// slot found free is released (a retried release whose first write landed
// while its answer was lost finds it so). Release even after a failed
// push, so the slot frees now rather than at Expires.
func (l *Limiter) ReleaseLease(ctx context.Context, lease Lease) error {
	names := leaseNames(lease.Slot)
	delete(names, "#ttl")
	update := "REMOVE #e, #o, #a"
	values := map[string]types.AttributeValue{":me": str(lease.Owner)}
	if push := pushTime(lease, micros(l.now())); push > 0 {
		update += " SET #p = :p"
		names["#p"], values[":p"] = pushAttribute, num(push)
	}
	_, err := l.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 l.leaseItemKey(lease.Key),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String("#o = :me"),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if item, failed := conditionFailed(err); failed {
		if _, held := item[names["#o"]]; !held {
			return nil // already free: nobody else holds it
		}
		return fmt.Errorf("%w: %q slot %d", ErrLeaseLost, lease.Key, lease.Slot)
	}
	return contention(LeaseKey(lease.Key), err)
}

// HandOverLease passes lease's slot to a new holder under f in one write:
// the release of one push and the acquire of the next (LeaseGate does it
// for the waiters of its process). It fails with ErrLeaseLost when the
// slot is no longer lease's (it expired and was taken), or when a slot at
// or above f.Max is live (max was lowered: those drain first).
func (l *Limiter) HandOverLease(ctx context.Context, lease Lease, f InFlight) (Lease, error) {
	owner := newCallTag().id
	now := micros(l.now())
	exp := now + f.Hold.Microseconds()
	_, err := l.updateItem(ctx, l.acquireInput(f, lease.Slot, owner, lease.Owner, now, exp, pushTime(lease, now)), noSDKRetry)
	if _, failed := conditionFailed(err); failed {
		return Lease{}, fmt.Errorf("%w: %q slot %d", ErrLeaseLost, lease.Key, lease.Slot)
	}
	if err != nil {
		return Lease{}, contention(LeaseKey(lease.Key), err)
	}
	return Lease{Key: f.Key, Slot: lease.Slot, Owner: owner, Acquired: time.UnixMicro(now), Expires: time.UnixMicro(exp)}, nil
}

// Leases reads key's live leases with a strongly consistent read, for
// operators (the CLI); acquiring never reads.
func (l *Limiter) Leases(ctx context.Context, key string) ([]Lease, error) {
	const op = "GetItem"
	actx, cancel := context.WithTimeout(ctx, l.attemptTimeout)
	defer cancel()
	out, err := l.db.GetItem(actx, &dynamodb.GetItemInput{
		TableName: &l.table, Key: l.leaseItemKey(key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, l.storeFailure(ctx, actx, op, err)
	}
	now := micros(l.now())
	var live []Lease
	for i, s := range leaseSlots(out.Item) {
		if s.exp > now {
			live = append(live, Lease{Key: key, Slot: i, Owner: s.owner, Acquired: time.UnixMicro(s.at), Expires: time.UnixMicro(s.exp)})
		}
	}
	return live, nil
}
