package limitertest

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// The in-flight leases (limiter.InFlight), as *limiter.Limiter keeps them
// in a lease set's item: per slot an expiry, an owner and when it was
// taken, a slot free once its expiry is not after now, and per set how
// long the last push released held its lease. Every answer is
// the table's (test/integration's TestLimitertestLeasesAnswerAsTheTable
// runs one script on both): a slot at or above a lowered max that is
// still live keeps every other slot from being taken, a busy set says when
// to ask again, a release of a slot someone else took is ErrLeaseLost.
// Where the table leaves a choice to chance, this limiter does not: it
// takes the lowest free slot, where *limiter.Limiter tries a random one.

// leaseSlot is one slot of a lease set; owner "" is a released slot.
type leaseSlot struct {
	exp, at int64 // Unix µs
	owner   string
}

func (l *Limiter) leaseSet(key string) *[limiter.MaxLeases]leaseSlot {
	s, ok := l.leases[key]
	if !ok {
		s = &[limiter.MaxLeases]leaseSlot{}
		l.leases[key] = s
	}
	return s
}

// owner is a new holder's id, unique within the limiter.
func (l *Limiter) owner() string {
	l.tags++
	return fmt.Sprintf("o%d", l.tags)
}

// Now reads the limiter's clock (WithClock), by which a LeaseGate over
// it reads the leases' expiries.
func (l *Limiter) Now() time.Time { return l.now() }

// AcquireLease takes one of f's slots now, or fails with a
// *limiter.LeaseBusyError saying when to ask again: the earliest expiry
// of a held slot below f.Max (the latest of those live above it, which
// must drain first), but no later than one push's time (f.Timeout, or
// f.Hold), nor, with none live above f.Max, than the first likely end of
// a held slot's push (taken plus the last released push's time; that
// time from now when every such end has passed); Recheck, for a waiter
// that stays, keeps the expiry or Timeout bound).
func (l *Limiter) AcquireLease(ctx context.Context, f limiter.InFlight) (limiter.Lease, error) {
	defer l.answer(ctx, "AcquireLease", f.Key)
	if err := l.ask(Call{Op: "AcquireLease", Key: f.Key}); err != nil {
		return limiter.Lease{}, err
	}
	if err := f.Validate(); err != nil {
		return limiter.Lease{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now().UnixMicro()
	set := l.leaseSet(f.Key)
	free, held := -1, 0
	var earliest, highLatest int64
	for i, s := range set {
		switch live := s.exp > now; {
		case !live && i < f.Max && free < 0:
			free = i
		case !live:
		case i >= f.Max:
			held++
			highLatest = max(highLatest, s.exp)
		default:
			held++
			if earliest == 0 || s.exp < earliest {
				earliest = s.exp
			}
		}
	}
	if free >= 0 && highLatest == 0 {
		return l.take(set, f, free, now), nil
	}
	until := highLatest
	if free < 0 {
		until = max(until, earliest)
	}
	need := f.Timeout
	if need == 0 {
		need = f.Hold
	}
	until = min(until, now+need.Microseconds())
	recheck := until
	if push := l.pushes[f.Key]; push > 0 && highLatest == 0 {
		end := now + push
		for _, s := range set[:f.Max] {
			if e := s.at + push; s.exp > now && e > now {
				end = min(end, e)
			}
		}
		until = min(until, end)
	}
	return limiter.Lease{}, &limiter.LeaseBusyError{Key: f.Key, Max: f.Max, Held: held, RetryAfter: micros(until - now), Recheck: micros(recheck - now)}
}

// take gives slot of set to a new holder under f from now.
func (l *Limiter) take(set *[limiter.MaxLeases]leaseSlot, f limiter.InFlight, slot int, now int64) limiter.Lease {
	s := leaseSlot{exp: now + f.Hold.Microseconds(), at: now, owner: l.owner()}
	set[slot] = s
	return limiter.Lease{Key: f.Key, Slot: slot, Owner: s.owner, Acquired: time.UnixMicro(s.at), Expires: time.UnixMicro(s.exp)}
}

// ReleaseLease frees lease's slot. A slot found free already is no error;
// one another holder took after lease expired is limiter.ErrLeaseLost.
func (l *Limiter) ReleaseLease(ctx context.Context, lease limiter.Lease) error {
	defer l.answer(ctx, "ReleaseLease", lease.Key)
	if err := l.ask(Call{Op: "ReleaseLease", Key: lease.Key}); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.leaseSet(lease.Key)
	switch s := &set[lease.Slot]; s.owner {
	case lease.Owner:
		*s = leaseSlot{}
		l.pushed(lease)
	case "":
	default:
		return fmt.Errorf("%w: %q slot %d", limiter.ErrLeaseLost, lease.Key, lease.Slot)
	}
	return nil
}

// HandOverLease passes lease's slot to a new holder under f, as
// *limiter.Limiter's one write does: limiter.ErrLeaseLost when the slot is
// no longer lease's, or a slot at or above f.Max is live.
func (l *Limiter) HandOverLease(ctx context.Context, lease limiter.Lease, f limiter.InFlight) (limiter.Lease, error) {
	defer l.answer(ctx, "HandOverLease", lease.Key)
	if err := l.ask(Call{Op: "HandOverLease", Key: lease.Key}); err != nil {
		return limiter.Lease{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now().UnixMicro()
	set := l.leaseSet(lease.Key)
	lost := set[lease.Slot].owner != lease.Owner
	for _, s := range set[f.Max:] {
		lost = lost || s.exp > now
	}
	if lost {
		return limiter.Lease{}, fmt.Errorf("%w: %q slot %d", limiter.ErrLeaseLost, lease.Key, lease.Slot)
	}
	l.pushed(lease)
	return l.take(set, f, lease.Slot, now), nil
}

// pushed records how long lease's push held it, released now; the caller
// holds l.mu.
func (l *Limiter) pushed(lease limiter.Lease) {
	if lease.Acquired.IsZero() {
		return
	}
	if push := l.now().UnixMicro() - lease.Acquired.UnixMicro(); push > 0 {
		l.pushes[lease.Key] = push
	}
}

// Leases is key's live leases, by slot.
func (l *Limiter) Leases(ctx context.Context, key string) ([]limiter.Lease, error) {
	defer l.answer(ctx, "Leases", key)
	if err := l.ask(Call{Op: "Leases", Key: key}); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now().UnixMicro()
	var live []limiter.Lease
	for i, s := range l.leaseSet(key) {
		if s.exp > now {
			live = append(live, limiter.Lease{Key: key, Slot: i, Owner: s.owner, Acquired: time.UnixMicro(s.at), Expires: time.UnixMicro(s.exp)})
		}
	}
	return live, nil
}
