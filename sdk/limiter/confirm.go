package limiter

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ConfirmAfter is how far ahead of its grant a slot of an adaptive bucket
// must lie to be confirmed (Confirm) before it is spent: a slot nearer
// than that is spent before a throttle could land between the grant and
// the send, and a read would only add its latency.
const ConfirmAfter = 100 * time.Millisecond

// Probing reports whether r was granted while its adaptive bucket climbed
// above the rate that held (gcra.AdaptState.Base): the fleet is then
// testing whether the vendor takes more, and a throttle is likely to end
// the test while this slot waits.
func (r Reservation) Probing() bool { return r.probing }

// Stamp is the adaptive state a slot was granted at, small enough to
// travel with a job deferred to its slot: what Confirm needs to tell
// whether a change since revoked the slot, and what Throttle needs to
// tell whether a 429 on it is news.
type Stamp struct {
	// Version is the adaptive state's version the grant was made at.
	Version int64
	// Interval is the emission interval (µs) it was granted at.
	Interval int64
	// Slot is the slot (Unix µs) the tokens were granted for, 0 if
	// unknown, and Tokens how many: a refusal of one of a bucket's first
	// requests after a silence puts a bucket of fixed rate on probation
	// (Throttle).
	Slot   int64
	Tokens int
}

// Probe is the Stamp of a slot granted while its bucket probed.
type Probe = Stamp

// Stamp is r's stamp, and whether an adaptive bucket granted r at all.
func (r Reservation) Stamp() (Stamp, bool) {
	return Stamp{Version: r.version, Interval: r.interval, Slot: micros(r.Slot), Tokens: r.Tokens}, r.adaptive
}

// Probe is r's stamp, and whether r is probing (see Probing).
func (r Reservation) Probe() (Probe, bool) {
	s, _ := r.Stamp()
	return s, r.probing
}

// Confirm checks that a slot adaptive bucket b granted at stamp s still
// stands, and is false when a change since its grant revoked it:
//   - a throttle whose Retry-After the slot falls inside (the change's
//     Since; see gcra.Adaptive.Throttled): the vendor asked for silence,
//     and the slot was booked before it asked;
//   - a change that lowered the rate below the one the slot was granted
//     at (a halving, the end of a probe, a lower published limit): slots
//     booked at the old rate would each earn a 429 of their own, and a
//     429 on each would only say the same again;
//   - more than one change: the store keeps the last alone, and one
//     between may have done either (survives).
//
// A revoked slot should not be spent: book again, at the rate that holds
// now and after the penalty. It costs one strongly consistent read (one
// read unit: the item is under 1 KB), unless this process already saw a
// change since the grant that revokes the slot, which costs none. A slot
// booked ahead cannot be confirmed from what this process saw alone: a
// throttle any worker reports may have landed meanwhile. A bucket that is
// not adaptive costs no call. On a store failure the answer is false with
// the error: fail closed.
func (l *Limiter) Confirm(ctx context.Context, b Bucket, s Stamp) (bool, error) {
	if b.Adaptive == nil {
		return true, nil
	}
	if seen := l.adapt.get(b.Key); seen.Version > s.Version && !survives(b, seen, s, micros(l.now())) {
		return false, nil
	}
	_, st, err := l.read(ctx, b.Key)
	if err != nil {
		return false, err
	}
	return survives(b, st, s, micros(l.now())), nil
}

// survives reports whether a slot stamped s survives the changes up to st,
// at now. The store keeps only the last change, so a slot granted more
// than one change ago is revoked: a change between may have lowered the
// rate below the slot's, which revokes it for good (stands), and the last
// does not say so. A throttle on a rate that climbed back after a halving
// returns it to half the rate it reached, the slot's own again: a slot
// booked ahead at 1/s, a halving to 0.5/s, a climb back to 2/s and a
// throttle to 1/s left an interval the slot's fits, while grants at 0.5/s
// in between counted it at half its worth (TestConfirmJudgesASlotOnlyOneChangeOld).
func survives(b Bucket, st AdaptState, s Stamp, now int64) bool {
	switch {
	case st.Version == s.Version:
		return true
	case st.Version > s.Version+1:
		return false
	}
	return stands(b, st, s, now)
}

// stands reports whether a slot stamped s survives a change to st, at now.
// The interval is st's at its change (st.Since), its slowest: a change
// that lowered the rate below the slot's revokes it for good, even once
// the rate has climbed back by the slot. Grants made at the lower rate
// counted the slots booked ahead at the old one at their lower worth and
// fit in among them (adversary seed 18 with seed 696's smallest parts: 8
// items booked ahead at 2/s, spent at the climbed-back rate beside 5 booked
// at 1/s after the halving, 13 tokens in one second over burst 10 + 2).
func stands(b Bucket, st AdaptState, s Stamp, now int64) bool {
	return now >= st.Since && b.Adaptive.Interval(st, b.Limit, st.Since) <= s.Interval
}

// confirmed is Wait's check of a grant SilenceAfter before its slot: whether to
// spend it. A slot granted less than ConfirmAfter (SilenceAfter) ahead is
// spent without a read. One granted further ahead is not spent inside a
// silence a vendor asked for since (Silence: free when this process heard
// from the bucket's item within SilenceAfter, one read otherwise), nor,
// probing, if a throttle revoked it (Confirm). A read before every push of
// a saturated bucket doubles its store calls (2.02 DynamoDB calls per push
// in the adaptive benchmark, against 1.10), but a Wait's slot may lie up
// to its maxWait ahead, a retry's the push's whole budget, and a 429 any
// worker met meanwhile asked the fleet for silence. Slots that travel with
// a deferred job, booked up to MaxReserve ahead, are checked by the
// dispatcher (see package dispatch).
func (l *Limiter) confirmed(ctx context.Context, b Bucket, g grant) (bool, error) {
	if g.Slot.Sub(time.UnixMicro(g.now)) < ConfirmAfter {
		return true, nil
	}
	if g.probing {
		s, _ := g.Stamp()
		if ok, err := l.Confirm(ctx, b, s); !ok || err != nil {
			return ok, err
		}
	}
	until, err := l.Silence(ctx, b)
	if err != nil || !until.IsZero() {
		return false, err
	}
	// The silence check left the adaptive state as fresh as its answer
	// (SilenceAfter): a lowering since the grant revokes the slot at no
	// read, as Confirm would. Grants at the lower rate fit in among the
	// slots booked ahead at the old one (adversary seed 696: a retry's 8
	// items booked at 0.44 s an item, a push's 4 at 0.87 s, 12 in 0.34 s).
	s, adaptive := g.Stamp()
	seen := l.adapt.get(b.Key)
	return !adaptive || seen.Version <= s.Version || survives(b, seen, s, micros(l.now())), nil
}

// read fetches bucket key's item with a strongly consistent read, through
// the gateway like every store call, and remembers its tat and adaptive state as the store's current ones.
func (l *Limiter) read(ctx context.Context, key string) (int64, AdaptState, error) {
	const op = "GetItem"
	var out *dynamodb.GetItemOutput
	at := micros(l.now())
	err := l.gateway(ctx, op, func(ctx context.Context) (err error) {
		out, err = l.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      &l.table,
			Key:            map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: key}},
			ConsistentRead: aws.Bool(true),
		})
		return err
	})
	if err != nil {
		return 0, AdaptState{}, err
	}
	tat, err := itemTAT(out.Item)
	if err != nil {
		return 0, AdaptState{}, &StoreError{Table: l.table, Op: op, kind: ErrUnavailable, Err: err}
	}
	st, err := itemAdapt(out.Item)
	if err != nil {
		return 0, AdaptState{}, &StoreError{Table: l.table, Op: op, kind: ErrUnavailable, Err: err}
	}
	booked, err := itemBooked(out.Item)
	if err != nil {
		return 0, AdaptState{}, &StoreError{Table: l.table, Op: op, kind: ErrUnavailable, Err: err}
	}
	l.seen.set(key, tat, booked, micros(l.now()))
	l.adapt.set(key, st)
	l.learnSilence(key, out.Item, at)
	return tat, st, nil
}
