package gcra

import (
	"math"
	"time"
)

// Share splits a bucket of rate r and burst b into leases, each spent by
// one execution environment with no store write, and a shared rest booked
// as any grant is. It is the math of docs/design.md's "Leased shares".
//
// Time is cut into epochs of length Epoch. In epoch k at most Leases
// leases are taken, each at ρ = Fraction·r ÷ Leases tokens a second, valid
// from the write that took it to the epoch's end; a lease is spent by a
// local pacer of rate ρ and burst β (Burst) that starts empty, so a
// lease's requests in any window w number at most β + ρ·w, and at most ρ·w
// in a window that starts with the lease. With n leases taken in the
// epoch, the shared rest is a bucket of rate r·(1 − n·Fraction ÷ Leases)
// and burst b − Leases·β (SharedLimit): the leases' banked tokens come out
// of the burst, their rates out of the rate, so that in any window W
//
//	shared + leased ≤ (b − Leases·β) + r·(1 − λ)·W + Leases·β + λ·r·W = b + r·W.
//
// A lease is taken only by a write that finds the shared part idle (tat ≤
// now: no slot booked ahead that was charged at a lower carve), and a
// carve falls only at an epoch's end, when every lease of the epoch has
// run out: a shared grant uses rate a lease held only after the lease
// expired.
type Share struct {
	// Fraction is the part of the rate leases may hold at once, in (0, 0.5].
	Fraction float64
	// Leases is the most leases taken in one epoch, ≥ 1, with
	// Leases·Burst below the bucket's burst (their banked tokens come out
	// of it).
	Leases int
	// Burst is the most tokens one lease banks (β; 0 stands for 1): an
	// environment's pushes of one bucket come in clumps (one invocation's
	// batch), and a lease that banks one token books the rest of a clump.
	Burst int
	// Epoch is how long a lease lives at most: leases end at the epoch's
	// end, ≥ 1 s.
	Epoch time.Duration
	// Quiet is how long a bucket must go without a write that does not
	// know the shares (a worker of an earlier release, a penalty, a
	// reset, a missing item) before a lease is taken: at least the longest
	// an invocation of the earlier release can outlive a deployment.
	Quiet time.Duration
}

// Validate reports what is wrong with s for a bucket of limit l.
func (s Share) Validate(l Limit) error {
	switch {
	case math.IsNaN(s.Fraction) || s.Fraction <= 0 || s.Fraction > 0.5:
		return argErr("share.fraction", "%v, want in (0, 0.5]", s.Fraction)
	case s.Leases < 1:
		return argErr("share.leases", "%d, want ≥ 1", s.Leases)
	case s.Burst < 0:
		return argErr("share.burst", "%d, want ≥ 1 (0: 1)", s.Burst)
	case s.Leases*s.leaseBurst() >= l.Burst:
		return argErr("share.leases", "%d leases banking %d tokens each, want below the burst %d: their tokens come out of it", s.Leases, s.leaseBurst(), l.Burst)
	case s.Epoch < time.Second:
		return argErr("share.epoch", "%v, want ≥ 1s", s.Epoch)
	case s.Quiet < 0:
		return argErr("share.quiet", "%v, want ≥ 0", s.Quiet)
	}
	if s.LeaseRate(l) <= 0 || s.LeaseRate(l) > MaxRate {
		return argErr("share.leases", "a lease's rate %v is out of range", s.LeaseRate(l))
	}
	if s.LeaseInterval(l) > s.Epoch.Microseconds() {
		// Such a lease would hold its carve of the rate for an epoch and
		// grant nothing.
		return argErr("share.epoch", "%v, want at least one lease interval (%v): a lease of %.3g/s would grant nothing in it",
			s.Epoch, time.Duration(s.LeaseInterval(l))*time.Microsecond, s.LeaseRate(l))
	}
	return nil
}

// EpochOf is the epoch now (µs) falls in.
func (s Share) EpochOf(now int64) int64 { return floorDiv(now, s.Epoch.Microseconds()) }

// EpochEnd is when epoch k ends (µs): every lease of k has run out by then.
func (s Share) EpochEnd(k int64) int64 { return (k + 1) * s.Epoch.Microseconds() }

// LeaseRate is ρ, one lease's rate in tokens per second.
func (s Share) LeaseRate(l Limit) float64 { return s.Fraction * l.Rate / float64(s.Leases) }

// LeaseInterval is 1/ρ in microseconds, rounded up as Interval is.
func (s Share) LeaseInterval(l Limit) int64 { return int64(math.Ceil(1e6 / s.LeaseRate(l))) }

// leaseBurst is β, the tokens one lease banks at most.
func (s Share) leaseBurst() int { return max(s.Burst, 1) }

// LeasedTokens is Leases·β, the tokens the leases bank at most: the
// bucket's burst gives them up, so a limit with a share keeps a burst of
// at least LeasedTokens + 1.
func (s Share) LeasedTokens() int { return s.Leases * s.leaseBurst() }

// SharedLimit is the limit of the shared part with n leases taken in the
// current epoch: rate r·(1 − n·Fraction ÷ Leases), burst b − Leases·β (at
// least 1: a limit derived with a smaller burst than the bucket's, burst
// one, stays below the bucket's b − Leases·β), the same margin. With n = 0
// the rate is whole but the burst still gives up Leases·β tokens: leases
// of the epoch before may have banked β tokens each.
func (s Share) SharedLimit(l Limit, n int) Limit {
	n = min(max(n, 0), s.Leases)
	return Limit{
		Rate:   l.Rate * (1 - float64(n)*s.Fraction/float64(s.Leases)),
		Burst:  max(l.Burst-s.Leases*s.leaseBurst(), 1),
		Margin: l.Margin,
	}
}

// Lease is one environment's lease of a bucket: taken in Epoch, its local
// pacer's tat (µs; the pacer grants when tat ≤ now).
type Lease struct {
	Epoch int64
	TAT   int64
}

// NewLease is the lease a write at now took: its pacer starts empty, so
// its first token comes one lease interval after the write (the write
// itself granted the request that took it), and it banks one more each
// interval, up to β.
func (s Share) NewLease(l Limit, now int64) Lease {
	return Lease{Epoch: s.EpochOf(now), TAT: now + int64(s.leaseBurst())*s.LeaseInterval(l)}
}

// Spend grants one token of lease at now if the lease is still valid (now
// before its epoch's end) and its pacer has one (a GCRA of rate ρ and
// burst β: TAT − (β − 1)/ρ ≤ now), and returns the lease after it. Leases
// grant one token at a time.
func (s Share) Spend(l Limit, lease Lease, now int64) (Lease, bool) {
	I := s.LeaseInterval(l)
	if now >= s.EpochEnd(lease.Epoch) || now < lease.TAT-int64(s.leaseBurst()-1)*I {
		return lease, false
	}
	lease.TAT = max(lease.TAT, now) + I
	return lease, true
}

// LeaseTokens is the most tokens a lease taken at now grants: ρ times
// what is left of its epoch.
func (s Share) LeaseTokens(l Limit, now int64) int64 {
	return max(s.EpochEnd(s.EpochOf(now))-now, 0) / s.LeaseInterval(l)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
