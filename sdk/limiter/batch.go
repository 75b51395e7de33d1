package limiter

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// MaxBatch is the most slots one ReserveBatch may ask for: N above it is
// refused with an *ArgumentError on "n", so that a huge N cannot allocate
// without bound.
const MaxBatch = 10_000

// BatchRequest asks for N tokens as N consecutive slots, one emission
// interval apart, booked by one conditional write.
type BatchRequest struct {
	N int
	// MaxDelay bounds the last slot booked.
	MaxDelay time.Duration
	// Partial books the largest number of slots that fit within MaxDelay
	// when not all N do. Without it a request whose N slots could never fit
	// (N·T > MaxDelay + burst·T) is refused, and one that does not fit now
	// is denied with the wait until it would.
	Partial bool
	// Ahead has the write claim the time Ahead from now (at most MaxDelay,
	// of which it takes its share), as ReserveAhead does: every slot lies
	// at least that far ahead, so that a caller with work to do before its
	// first slot (a store call, a render) reaches it in time.
	Ahead time.Duration
}

// Batch is a group of slots booked together.
type Batch struct {
	Key string
	// Slots are the booked slots in order, T apart once past now; there may
	// be fewer than requested with Partial.
	Slots []time.Time
	// Requested is the N asked for; Requested − len(Slots) were not booked.
	Requested int

	stamp    Stamp // the one write's, as for a Reservation
	adaptive bool
	probing  bool
}

// Stamp is the stamp of the batch's slots, all booked by one write, and
// whether an adaptive bucket booked them (see Reservation.Stamp).
func (b Batch) Stamp() (Stamp, bool) { return b.stamp, b.adaptive }

// Probe is the stamp of the batch's slots and whether they were booked
// while the bucket probed (see Reservation.Probe).
func (b Batch) Probe() (Probe, bool) { return b.stamp, b.probing }

// ReserveBatch books up to req.N slots of bucket b with one DynamoDB write:
// the write advances tat by k·T, which is exactly what k single
// reservations would have done, so the fleet invariant holds however
// batches and single grants mix. Slot i is the old max(tat, now) + (i+1)·T
// − burst·T, never earlier than now.
//
// Unlike Reserve, N may exceed the burst: the slots are spread over time.
// N is at most MaxBatch (10,000).
// The number booked is computed from the tat last seen and, after a failed
// condition, from the current item, so a concurrent writer costs at most
// one extra write.
func (l *Limiter) ReserveBatch(ctx context.Context, b Bucket, req BatchRequest) (Batch, error) {
	if err := b.Validate(); err != nil {
		return Batch{}, err
	}
	ahead := min(max(req.Ahead, 0), max(req.MaxDelay, 0))
	delay := (req.MaxDelay - ahead).Microseconds()
	switch {
	case req.N < 1:
		return Batch{}, &ArgumentError{Field: "n", Reason: fmt.Sprintf("%d, want ≥ 1", req.N)}
	case req.N > MaxBatch:
		return Batch{}, &ArgumentError{Field: "n", Reason: fmt.Sprintf("%d, want at most %d (limiter.MaxBatch)", req.N, MaxBatch)}
	case req.MaxDelay < 0:
		return Batch{}, &ArgumentError{Field: "maxDelay", Reason: fmt.Sprintf("%v, want ≥ 0", req.MaxDelay)}
	case !req.Partial:
		// Whole or nothing: the same rule as a reservation of N tokens.
		if err := gcra.Check(b.Limit, req.N, delay); err != nil {
			return Batch{}, err
		}
	default:
		if err := gcra.Check(b.Limit, 1, delay); err != nil {
			return Batch{}, err
		}
	}
	// A lease grants the first slots, as many as it has banked, with no
	// write; the rest, if any, are booked as always (a batch that must be
	// whole books all of them).
	var leased []time.Time
	if req.N > 1 && !req.Partial && b.Share != nil {
		l.shares.miss(MissSeveral, req.N)
	}
	if req.N == 1 || req.Partial {
		for len(leased) < req.N {
			r, why := l.tryLocal(ctx, b, 1, ahead)
			if why != "" && len(leased) > 0 {
				l.shares.miss(MissClump, req.N-len(leased))
			} else if why != "" {
				l.shares.miss(why, req.N)
			}
			if why != "" || b.Share == nil {
				break
			}
			leased = append(leased, r.Slot)
		}
		if len(leased) == req.N {
			return Batch{Key: b.Key, Requested: req.N, Slots: leased}, nil
		}
		req.N -= len(leased)
	}
	size := func(int64, int64, Limit, int64) int { return req.N }
	if req.Partial {
		size = func(tat, now int64, lim Limit, spacing int64) int {
			// Ask for at least one, so a full bucket yields a denial with
			// the exact wait for its next slot.
			return max(gcra.SpreadFit(tat, now, lim, req.N, spacing, delay), 1)
		}
	}
	g, err := l.bookAhead(ctx, b, size, req.MaxDelay, ahead, true)
	if err != nil {
		if len(leased) > 0 {
			return Batch{Key: b.Key, Requested: req.N + 1, Slots: leased}, nil
		}
		return Batch{}, err
	}
	slots := gcra.SpreadSlots(g.tat, g.now, g.lim, g.Tokens, g.ch.F, g.ch.Charge)
	out := Batch{Key: b.Key, Requested: req.N + len(leased), Slots: append(leased, make([]time.Time, len(slots))...)}
	out.stamp, out.adaptive = g.Stamp()
	out.probing = g.probing
	for i, s := range slots {
		out.Slots[len(leased)+i] = time.UnixMicro(s)
	}
	return out, nil
}
