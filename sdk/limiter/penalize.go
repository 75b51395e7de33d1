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
	return l.penalizeRefused(ctx, b, until, Stamp{})
}

// penalizeRefused is Penalize for a refusal of the request sent at
// refused.Slot (µs; 0 for unknown) with refused.Tokens, which may put a
// bucket of fixed rate on probation.
func (l *Limiter) penalizeRefused(ctx context.Context, b Bucket, until time.Time, refused Stamp) error {
	if err := b.Validate(); err != nil {
		return err
	}
	now := l.now()
	if until.Sub(now) > MaxPenalty {
		return &ArgumentError{Field: "until", Reason: fmt.Sprintf("%v after now, want at most %v (limiter.MaxPenalty)", until.Sub(now), MaxPenalty)}
	}
	l.heard.add(b.Key, micros(until))
	lim, st := l.effective(b, micros(now))
	return l.penalize(ctx, b, until, lim, st, refused)
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
//
// refused is the refused request's slot (µs, 0 for unknown) and tokens, on
// a bucket of fixed rate: with the silence, the write records the
// probation that refusal leads to (gcra.NextProbation), decided on the
// silence and probation this process last saw, and conditional on that
// silence being the item's, so that two refusals of one overload do not
// both count.
func (l *Limiter) penalize(ctx context.Context, b Bucket, until time.Time, lim Limit, st AdaptState, refused Stamp) error {
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
		prob := l.nextProbation(b, needSilence, refused, micros(now), u)
		// Setting an absolute value is idempotent, so the SDK's own retries
		// are safe here.
		in := l.penalizeInput(b.Key, penalty, u, adaptTTL(b, st, penalty), needTAT, needSilence, prob)
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
			if needSilence {
				// The silence the next refusal's probation is decided
				// after: this one, with the probation it set or kept.
				p, _ := l.probation.get(b.Key)
				if prob != nil {
					p = prob.next
				}
				l.probation.learn(b.Key, p, u, at)
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

// probationWrite is the probation a penalty records with its silence,
// and the silence it was decided after (the condition of the write).
type probationWrite struct {
	next  gcra.Probation
	after int64 // µs; 0: none
}

// nextProbation is the probation a penalty's write of a silence until u
// records for the refusal of the request refused (nil: none to write, the
// item's stands).
func (l *Limiter) nextProbation(b Bucket, withSilence bool, refused Stamp, now, u int64) *probationWrite {
	if !withSilence || refused.Slot <= 0 || b.Adaptive != nil || b.Share != nil {
		return nil
	}
	p, after := l.probation.get(b.Key)
	next := gcra.NextProbation(p, after, refused.Slot, refused.Tokens, now, u, b.Limit)
	if next == p {
		return nil
	}
	return &probationWrite{next: next, after: after}
}
