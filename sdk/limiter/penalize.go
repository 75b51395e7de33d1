package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

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
	l.heard.add(b.Key, micros(until))
	lim, st := l.effective(b, micros(now))
	return l.penalize(ctx, b, until, lim, st)
}

// penalize empties b until `until` at the effective limit lim (from the
// adaptive state st): the burst lim allows refills after it. It also
// records the silence on the item (silenceAttribute), so that a slot
// granted before the penalty is not spent inside it (Silence).
//
// An adaptive bucket's penalty is conditional on the version of st, like
// every write of it: the penalty's tat and the TTL both follow from the
// learned rate, and a process that has not seen it (say, one that just
// started) would empty the bucket at the configured rate and set a TTL
// that forgets the learned one early. A failed condition hands back the
// state, and the penalty is decided again on it.
//
// Both values only rise: tat to the penalty, the silence to until. DynamoDB
// has no max(), so the write is conditional on both being lower, and a
// failed condition's item tells which of them still needs the write.
func (l *Limiter) penalize(ctx context.Context, b Bucket, until time.Time, lim Limit, st AdaptState) error {
	now := l.now()
	u := micros(until)
	var had struct {
		tat, silence int64
		ok           bool // what the last failed condition handed back
	}
	for attempt := 0; attempt < l.attempts; attempt++ {
		penalty := gcra.Penalty(u, lim)
		needTAT := !had.ok || had.tat < penalty
		if _, booked, fresh := l.seen.lookup(b.Key, micros(now), l.cacheAge.Microseconds()); fresh && booked >= penalty {
			// Slots are booked past until: the bucket is already empty
			// past it, and no Reset changes that (it keeps booked slots).
			// This is the common case for a drain on a vendor's low
			// remaining count while the fleet has booked slots ahead. The
			// silence is written all the same: those slots were booked
			// before it. A penalty seen before proves nothing: a Reset may
			// have dropped it.
			needTAT = false
		}
		needSilence := !had.ok || had.silence < u
		if !needTAT && !needSilence {
			return nil
		}
		// Setting an absolute value is idempotent, so the SDK's own retries
		// are safe here.
		in := l.penalizeInput(b.Key, penalty, u, adaptTTL(b, st, penalty), needTAT, needSilence)
		if b.Adaptive != nil && needTAT {
			withVersion(in, st.Version)
		}
		at := micros(l.now())
		_, err := l.updatePenalty(ctx, in)
		if err == nil {
			if needTAT {
				l.seen.observe(b.Key, penalty, micros(l.now()))
			}
			if needSilence {
				l.silent.learn(b.Key, u, at)
			}
			return nil
		}
		item, failed := conditionFailed(err)
		if !failed {
			return contention(b.Key, err)
		}
		if err := l.observeItem(b.Key, item); err != nil {
			return err
		}
		had.tat, _ = itemTAT(item)
		had.silence, _ = itemMicros(item, silenceAttribute)
		had.ok = true
		if b.Adaptive != nil {
			if cur := l.adapt.get(b.Key); cur.Version != st.Version {
				st, lim = cur, b.Adaptive.Effective(cur, b.Limit, micros(now))
			}
		}
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
// rate), and of the silence it recorded (Silence). It lowers tat to the booked horizon, the tat the last grant left,
// and no further: slots already handed out (up to the max delay ahead)
// keep counting, so the fleet's bound, burst + rate·W in any window W,
// holds across a Reset (see Reset in "Guarantees and bounds" of the
// repository's docs/design.md). A bucket
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
