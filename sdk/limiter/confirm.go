package limiter

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ConfirmAfter is how far ahead of its grant a probing slot (see
// Reservation.Probing) must lie for Wait to confirm it before returning:
// a slot nearer than that is spent before a throttle could land between
// the grant and the send, and a read would only add its latency.
const ConfirmAfter = 100 * time.Millisecond

// Probing reports whether r was granted while its adaptive bucket climbed
// above the rate that last held (gcra.AdaptState.Base): the fleet is then
// testing whether the vendor takes more, and a throttle may end the test
// while this slot waits. Slots booked at the probing rate by other workers
// would each earn a 429 once the vendor's burst is spent; Confirm lets a
// worker find out, with one read, that its slot was revoked.
func (r Reservation) Probing() bool { return r.probing }

// Probe is what Confirm needs to know of a probing reservation, small
// enough to travel with a job deferred to its slot.
type Probe struct {
	// Version is the adaptive state's version the grant was made at.
	Version int64
	// Interval is the emission interval (µs) it was granted at.
	Interval int64
}

// Probe is r's probe, and whether r is probing at all.
func (r Reservation) Probe() (Probe, bool) {
	return Probe{Version: r.version, Interval: r.interval}, r.probing
}

// Confirm checks, with one strongly consistent read, that a slot granted
// while bucket b probed (Reservation.Probe) still stands: false when a
// change since its grant lowered the bucket's rate below the one it was
// granted at (a throttle ended the probe), true otherwise. A revoked slot
// should not be spent: the vendor's burst is gone and the fleet is back at
// the rate that held, so book again.
//
// A bucket that is not adaptive costs no call. On a store failure the
// answer is false with the error: fail closed.
func (l *Limiter) Confirm(ctx context.Context, b Bucket, p Probe) (bool, error) {
	if b.Adaptive == nil {
		return true, nil
	}
	_, st, err := l.read(ctx, b.Key)
	if err != nil {
		return false, err
	}
	if st.Version == p.Version {
		return true, nil
	}
	return b.Adaptive.Interval(st, b.Limit, micros(l.now())) <= p.Interval, nil
}

// confirmed is Wait's check of a probing grant once its slot came: whether
// to spend it. A slot granted less than ConfirmAfter ahead is spent
// without a read.
func (l *Limiter) confirmed(ctx context.Context, b Bucket, g grant) (bool, error) {
	if !g.probing || g.Slot.Sub(time.UnixMicro(g.now)) < ConfirmAfter {
		return true, nil
	}
	p, _ := g.Probe()
	return l.Confirm(ctx, b, p)
}

// read fetches bucket key's item with a strongly consistent read, through
// the gateway like every store call, and remembers its tat and adaptive state as the store's current ones.
func (l *Limiter) read(ctx context.Context, key string) (int64, AdaptState, error) {
	const op = "GetItem"
	var out *dynamodb.GetItemOutput
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
	return tat, st, nil
}
