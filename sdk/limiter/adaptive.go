package limiter

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// Adaptive makes a bucket learn the vendor's real limit; see gcra.Adaptive
// and "Adaptive limits" in the repository's docs/design.md.
type Adaptive = gcra.Adaptive

// AdaptState is an adaptive bucket's learned state; see gcra.AdaptState.
type AdaptState = gcra.AdaptState

// The adaptive state's attributes, beside tat in the bucket's item.
const (
	// baseAttribute holds the emission interval (µs) the last change set.
	baseAttribute = "iv"
	// sinceAttribute holds when that change was made (Unix µs).
	sinceAttribute = "ad"
	// ceilingAttribute holds the interval (µs) of a limit the vendor
	// published below the configured one (0: none).
	ceilingAttribute = "cl"
	// probesAttribute counts failed probes in a row (gcra.AdaptState.Probes).
	probesAttribute = "pf"
	// versionAttribute counts changes; every write of an adaptive bucket is
	// conditional on it.
	versionAttribute = "av"
)

// ThrottleHold is how long after a change a throttle signal of unknown
// origin (Throttle with no stamp: a push paced locally while the store was
// down, or one sent within ConfirmAfter of its grant) is taken as the
// fleet's reaction still settling rather than as a new signal: a push made
// on a slot booked before the change and answered after it would otherwise
// halve a rate already halved for the same overload. (Since a throttle's
// change counts from the end of its Retry-After, the hold covers that
// too.)
const ThrottleHold = 2 * time.Second

// adaptNames extend an expression's names with the adaptive attributes.
func adaptNames(base map[string]string) map[string]string {
	out := make(map[string]string, len(base)+5)
	for k, v := range base {
		out[k] = v
	}
	out["#iv"], out["#ad"], out["#cl"], out["#pf"], out["#av"] = baseAttribute, sinceAttribute, ceilingAttribute, probesAttribute, versionAttribute
	return out
}

// versionCondition is the clause that makes a write use the adaptive state
// it computed with: the version this process saw, or none for a bucket
// never adapted.
func versionCondition(in map[string]types.AttributeValue, version int64) string {
	if version == 0 {
		return "attribute_not_exists(#av)"
	}
	in[":av"] = num(version)
	return "#av = :av"
}

// withVersion adds the version clause to a grant write of an adaptive
// bucket.
func withVersion(in *dynamodb.UpdateItemInput, version int64) {
	// DynamoDB refuses names an expression does not use: only #av here.
	names := make(map[string]string, len(in.ExpressionAttributeNames)+1)
	for k, v := range in.ExpressionAttributeNames {
		names[k] = v
	}
	names["#av"] = versionAttribute
	in.ExpressionAttributeNames = names
	in.ConditionExpression = aws.String("(" + aws.ToString(in.ConditionExpression) + ") AND " + versionCondition(in.ExpressionAttributeValues, version))
}

// adaptInput changes the adaptive state from the version this process saw
// to next. With floor > 0 it also empties the bucket until floor (tat :=
// floor if lower: push; or left as it is if already at or past it: keep),
// which a lower rate needs (see "Adaptive limits" in the repository's
// docs/design.md); floor 0 only
// changes the state (a raise, which needs no emptying).
//
// Every form sets the TTL to ttl (s), so that the item outlives the climb
// of the state it now holds: a keep or a raise that left the TTL alone
// would let an idle bucket forget a rate it learned before the climb back
// ends. A TTL must never undercut tat either (an item deleted while tat is
// ahead is a full bucket, a burst too early), so the keep and raise forms,
// which leave tat where it is, are also conditional on tat ≤ ttl: a tat
// further ahead than this process saw fails the condition, and the retry
// computes ttl from the tat the answer hands back.
func (l *Limiter) adaptInput(key string, next AdaptState, seen int64, floor int64, f form, ttl int64) *dynamodb.UpdateItemInput {
	vals := map[string]types.AttributeValue{
		":iv": num(next.Base), ":ad": num(next.Since), ":cl": num(next.Ceiling), ":pf": num(next.Probes), ":av1": num(next.Version),
		":ttl": num(ttl),
	}
	cond := versionCondition(vals, seen)
	set := "SET #iv = :iv, #ad = :ad, #cl = :cl, #pf = :pf, #av = :av1, #ttl = :ttl"
	switch {
	case floor > 0 && f == idle: // push: tat below the floor, or no item
		set += ", #tat = :p"
		cond = "(attribute_not_exists(#tat) OR #tat < :p) AND " + cond
		vals[":p"] = num(floor)
	case floor > 0: // keep: tat already at or past the floor
		cond = "#tat >= :p AND #tat <= :tt AND " + cond
		vals[":p"], vals[":tt"] = num(floor), num(ttl*1_000_000)
	default: // raise: tat as it is, or no item
		cond = "(attribute_not_exists(#tat) OR #tat <= :tt) AND " + cond
		vals[":tt"] = num(ttl * 1_000_000)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: key}},
		ExpressionAttributeNames:            adaptNames(names),
		UpdateExpression:                    aws.String(set),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeValues:           vals,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// itemAdapt reads the adaptive state from an item; none is the zero state.
func itemAdapt(item map[string]types.AttributeValue) (AdaptState, error) {
	var s AdaptState
	for _, f := range []struct {
		name string
		into *int64
	}{{baseAttribute, &s.Base}, {sinceAttribute, &s.Since}, {ceilingAttribute, &s.Ceiling}, {probesAttribute, &s.Probes}, {versionAttribute, &s.Version}} {
		v, ok := item[f.name]
		if !ok {
			continue
		}
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			return AdaptState{}, fmt.Errorf("attribute %s is not a number", f.name)
		}
		x, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return AdaptState{}, fmt.Errorf("attribute %s: %w", f.name, err)
		}
		*f.into = x
	}
	return s, nil
}

// seenAdapt remembers, per bucket, the adaptive state this process last
// saw. Versions only grow in the store (an item the TTL deleted starts
// again at 0, which set accepts), so the highest is the newest.
type seenAdapt struct {
	mu sync.Mutex
	m  map[string]AdaptState
}

func (s *seenAdapt) get(key string) AdaptState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// observe keeps st if it is not older than what was seen: answers of
// concurrent calls may come back out of order.
func (s *seenAdapt) observe(key string, st AdaptState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxSeenKeys {
		s.m = make(map[string]AdaptState)
	}
	if st.Version >= s.m[key].Version {
		s.m[key] = st
	}
}

// set records st as the store's current state (an item a failed condition
// handed back), even if older than what was seen.
func (s *seenAdapt) set(key string, st AdaptState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxSeenKeys {
		s.m = make(map[string]AdaptState)
	}
	s.m[key] = st
}

// effective is b's limit at now, with the adaptive state this process saw
// (the configured limit for a bucket that is not adaptive), and that
// state.
func (l *Limiter) effective(b Bucket, now int64) (Limit, AdaptState) {
	if b.Adaptive == nil {
		return b.Limit, AdaptState{}
	}
	st := l.adapt.get(b.Key)
	return b.Adaptive.Effective(st, b.Limit, now), st
}

// adaptTTL is the expiry (s) an adaptive bucket's write sets: late enough
// for the state to outlive its climb, so an idle bucket does not forget a
// lowered rate before it would have climbed back anyway.
func adaptTTL(b Bucket, st AdaptState, maxTAT int64) int64 {
	if b.Adaptive == nil {
		return ttlSeconds(maxTAT)
	}
	return ttlSeconds(max(maxTAT, b.Adaptive.Settled(st, b.Limit)))
}

// Throttle reports a vendor's throttle signal (a 429, a 403 from a vendor
// that throttles with it) for bucket b: the bucket is emptied until `until`
// for every worker, as Penalize does, and, for an adaptive bucket, its
// effective rate drops (gcra.Adaptive.Throttled) in the same conditional
// write. granted is the stamp of the slot the throttled request was sent
// on (Reservation.Stamp, or the one a deferred job carried): when the
// fleet's rate changed since it was granted, the change already answered
// this overload and the rate is left alone, however long ago it was
// made. With granted nil (a slot whose grant is unknown: one paced
// locally while the store was down), a change younger than ThrottleHold
// is taken as that answer.
//
// A bucket that is not adaptive is penalized, and, when granted names the
// refused slot, put on probation if the vendor refused one of its first
// slots after its last silence (gcra.Probation): its slots are spaced
// until a few silences' time passes with no such refusal. until is bounded
// as for Penalize.
func (l *Limiter) Throttle(ctx context.Context, b Bucket, granted *Stamp, until time.Time) error {
	if b.Adaptive == nil {
		var refused Stamp
		if granted != nil {
			refused = *granted
		}
		return l.penalizeRefused(ctx, b, until, refused)
	}
	if until.Sub(l.now()) <= MaxPenalty {
		l.heard.add(b.Key, micros(until))
	}
	return l.change(ctx, b, until, func(st AdaptState, now int64) (AdaptState, bool, bool) {
		switch {
		case granted != nil && granted.Version != st.Version:
			return st, false, false
		case granted == nil && st.Version != 0 && now-st.Since < ThrottleHold.Microseconds():
			return st, false, false
		}
		return b.Adaptive.Throttled(st, b.Limit, now, micros(until)), true, true
	})
}

// Publish tells an adaptive bucket the limit the vendor publishes for it,
// in tokens per second (a RateLimit-Policy quota over its window, say). A
// rate below the effective one lowers it for the whole fleet at once (and
// empties the bucket at the new rate, so the lower rate starts with no
// burst), but never below the bucket's MinRate; one above a limit
// published before lifts that cap, and the rate climbs to it. A rate that
// is NaN, infinite or not above 0 is refused with an *ArgumentError on
// "rate". Anything else, and any call on a bucket that is not
// adaptive, costs nothing: the decision is made on the state this process
// saw, and a write is sent only for a change.
func (l *Limiter) Publish(ctx context.Context, b Bucket, rate float64) error {
	if err := b.Validate(); err != nil || b.Adaptive == nil {
		return err
	}
	if err := b.Adaptive.CheckPublished(rate); err != nil {
		return err
	}
	return l.change(ctx, b, time.Time{}, func(st AdaptState, now int64) (AdaptState, bool, bool) {
		return b.Adaptive.Published(st, b.Limit, rate, now)
	})
}

// change is the one place an adaptive state changes: decide on the state
// this process saw, send one conditional write, and on a failed condition
// decide again on the item it hands back. decide returns the next state,
// whether it differs, and whether the change lowers the rate, which must
// empty the bucket at the new rate: under a lower rate the same tat leaves
// more tokens (the tolerance, burst × interval, grows), so a lower rate
// that kept tat would release a burst. until (zero for none) is a penalty:
// the bucket is emptied until then, changed or not.
func (l *Limiter) change(ctx context.Context, b Bucket, until time.Time, decide func(st AdaptState, now int64) (next AdaptState, changed, lower bool)) error {
	if err := b.Validate(); err != nil {
		return err
	}
	nowT := l.now()
	if !until.IsZero() && until.Sub(nowT) > MaxPenalty {
		return &ArgumentError{Field: "until", Reason: fmt.Sprintf("%v after now, want at most %v (limiter.MaxPenalty)", until.Sub(nowT), MaxPenalty)}
	}
	now := micros(nowT)
	st := l.adapt.get(b.Key)
	tat, _ := l.seen.get(b.Key, now, l.cacheAge.Microseconds())
	for attempt := 0; attempt < l.attempts; attempt++ {
		next, changed, lower := decide(st, now)
		if !changed {
			if until.IsZero() {
				return nil
			}
			// The rate already answered this overload; the penalty stands.
			return l.penalize(ctx, b, until, b.Adaptive.Effective(st, b.Limit, now), st, Stamp{})
		}
		var floor int64
		if lower || !until.IsZero() {
			floor = max(micros(until), now) + b.Adaptive.Effective(next, b.Limit, now).Tolerance()
		}
		f := busy
		if floor > 0 && tat < floor {
			f = idle
		}
		write := l.updateItem
		if !until.IsZero() {
			write = l.updatePenalty
		}
		out, err := write(ctx, l.adaptInput(b.Key, next, st.Version, floor, f, adaptTTL(b, next, max(floor, tat))))
		if err == nil {
			if cur, err := itemTAT(out.Attributes); err == nil {
				l.seen.observe(b.Key, cur, micros(l.now()))
			}
			l.adapt.observe(b.Key, next)
			return nil
		}
		item, failed := conditionFailed(err)
		if !failed {
			return contention(b.Key, err)
		}
		if tat, err = l.learnItem(b.Key, item); err != nil {
			return err
		}
		st = l.adapt.get(b.Key)
	}
	return &ContendedError{Key: b.Key, Writes: l.attempts}
}
