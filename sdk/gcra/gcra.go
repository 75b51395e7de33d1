// How the arithmetic works (package gcra is introduced in doc.go).
//
// A token bucket of rate r tokens/s and burst b is the same thing as the
// Generic Cell Rate Algorithm (GCRA) with emission interval T = 1/r and
// tolerance τ = b·T, and GCRA needs only one stored number per bucket: the
// theoretical arrival time, tat. The bucket is full while tat ≤ now, and
// every granted token pushes tat one interval further ahead. A request for n
// tokens at time now conforms iff
//
//	max(tat, now) + n·T − now ≤ τ,
//
// that is, iff the tokens fit in what has refilled since. A reservation with a
// maximum delay D relaxes the bound to τ + D: the caller owns a slot in the
// future, at slot = max(tat, now) + n·T − τ, and must not spend the tokens
// before it.
//
// All times are integer microseconds since the Unix epoch, the unit the store
// keeps, so the arithmetic is exact and the same on every worker. Time is a
// parameter of every function, never read from a clock, which is what makes
// the math testable without sleeping.

package gcra

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxRate is the highest rate a Limit may have: the emission interval is
// kept in whole microseconds and must not round to zero.
const MaxRate = 1e6

// maxTolerance bounds b·T (and so every time offset this package adds) well
// below the int64 range, so that tat + n·T + maxDelay never overflows.
const maxTolerance = int64(100 * 365 * 24 * time.Hour / time.Microsecond)

// ErrInvalidArgument is matched by every error Validate and Check return.
var ErrInvalidArgument = errors.New("invalid argument")

// ErrNeverGrantable is matched by the error Check returns for a request that
// no amount of waiting can satisfy (n > burst for a Take).
var ErrNeverGrantable = errors.New("request can never be granted")

// ArgumentError names the field of a limit or request that is refused.
type ArgumentError struct {
	Field  string // "limit.rate", "limit.burst", "n", "maxDelay"
	Reason string
	never  bool
}

func (e *ArgumentError) Error() string { return "invalid " + e.Field + ": " + e.Reason }

// Is matches ErrInvalidArgument, and ErrNeverGrantable for n beyond what the
// bucket can ever hold.
func (e *ArgumentError) Is(target error) bool {
	return target == ErrInvalidArgument || (e.never && target == ErrNeverGrantable)
}

func argErr(field, format string, args ...any) error {
	return &ArgumentError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Limit is a token bucket's rate and size.
//
// The zero Limit is invalid: there is no "unlimited" value, since a fleet
// limiter that silently stops limiting is the failure this project exists to
// prevent.
type Limit struct {
	// Rate is the refill rate in tokens per second: > 0, finite and at most
	// MaxRate.
	Rate float64
	// Burst is the bucket size: the most tokens granted at one instant, ≥ 1.
	Burst int
	// Margin is refill time the bucket keeps free: its tolerance is
	// b·T − Margin, so it grants at most burst − rate·Margin tokens at one
	// instant and burst + rate·(W − Margin) in any window W of slots, while
	// the long-run rate is unchanged. A vendor counts requests when they
	// arrive, not at their slots, and the time between the two varies
	// from request to request; a window of W at the vendor then holds the
	// slots of a window of W + that spread, and Margin, at least the
	// spread, keeps the vendor's count within burst + rate·W (see the
	// margin section of docs/design.md). It never takes the last token: a
	// Margin of b·T or more leaves a bucket of one token, so a limit
	// derived with a smaller burst (one shard, burst one) stays valid.
	// Zero keeps no margin; it must not be negative.
	Margin time.Duration
}

// PerSecond returns a limit of rate tokens per second with the given burst.
func PerSecond(rate float64, burst int) Limit { return Limit{Rate: rate, Burst: burst} }

// PerMinute returns a limit of n tokens per minute with the given burst.
func PerMinute(n float64, burst int) Limit { return Limit{Rate: n / 60, Burst: burst} }

// Validate reports what is wrong with l as an *ArgumentError naming the
// field.
func (l Limit) Validate() error {
	switch {
	case math.IsNaN(l.Rate) || math.IsInf(l.Rate, 0):
		return argErr("limit.rate", "%v, want a finite number of tokens per second", l.Rate)
	case l.Rate <= 0:
		return argErr("limit.rate", "%v, want > 0 tokens per second", l.Rate)
	case l.Rate > MaxRate:
		return argErr("limit.rate", "%v, want at most %g tokens per second (the interval would round below 1µs)", l.Rate, float64(MaxRate))
	case l.Burst < 1:
		return argErr("limit.burst", "%d, want ≥ 1", l.Burst)
	case l.Margin < 0:
		return argErr("limit.margin", "%v, want ≥ 0", l.Margin)
	case l.Margin.Microseconds() > maxTolerance:
		return argErr("limit.margin", "%v, want at most 100 years", l.Margin)
	}
	if t := l.intervalFloat(); t*float64(l.Burst) > float64(maxTolerance) {
		return argErr("limit.burst", "%d at rate %v spans more than 100 years", l.Burst, l.Rate)
	}
	return nil
}

func (l Limit) intervalFloat() float64 { return math.Ceil(1e6 / l.Rate) }

// Interval is the emission interval T in microseconds: the time one token
// takes to refill. It is rounded up, never down: a truncated interval would
// make every worker's bucket refill slightly fast, and across a fleet that
// error is an over-grant the vendor sees.
func (l Limit) Interval() int64 { return int64(l.intervalFloat()) }

// Tolerance is τ = b·T − margin in microseconds, and at least T: how far
// ahead of now tat may run.
func (l Limit) Tolerance() int64 {
	T := l.Interval()
	return max(int64(l.Burst)*T-l.Margin.Microseconds(), T)
}

// Capacity is the most tokens granted at one instant: τ/T, which is the
// burst less the whole tokens rate·Margin takes, and at least 1.
func (l Limit) Capacity() int { return int(l.Tolerance() / l.Interval()) }

// Decision is the outcome of one request against a bucket state.
type Decision struct {
	// Allowed reports whether the request conforms.
	Allowed bool
	// TAT is the tat to store when Allowed; otherwise the tat unchanged.
	TAT int64
	// Slot is the moment the granted tokens may be spent: now for a token
	// available at once, later for a reservation. Zero when denied.
	Slot int64
	// RetryAfter is, when denied, the exact time in microseconds after now
	// at which the same request (same n and maxDelay) conforms, provided no
	// one else takes tokens meanwhile. Zero when allowed.
	RetryAfter int64
	// Remaining is the number of whole tokens left at now once the decision
	// is applied.
	Remaining int
}

// Check reports, as an *ArgumentError, what is wrong with l, n or maxDelay
// (µs), including a request no state of the bucket could ever grant: that
// is what keeps an impossible request from turning into an endless wait.
func Check(l Limit, n int, maxDelay int64) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if n < 1 {
		return argErr("n", "%d, want ≥ 1", n)
	}
	if maxDelay < 0 {
		return argErr("maxDelay", "%v, want ≥ 0", micros(maxDelay))
	}
	if maxDelay > maxTolerance {
		return argErr("maxDelay", "%v, want at most 100 years", micros(maxDelay))
	}
	// In an idle bucket the slot is n·T − τ after now; if even that is past
	// maxDelay, no state of the bucket grants the request.
	if int64(n) > (l.Tolerance()+maxDelay)/l.Interval() {
		reason := fmt.Sprintf("%d exceeds burst %d: it can never be granted", n, l.Burst)
		if l.Margin > 0 {
			reason = fmt.Sprintf("%d exceeds the %d tokens burst %d less margin %v holds: it can never be granted", n, l.Capacity(), l.Burst, l.Margin)
		}
		if maxDelay > 0 {
			less := ""
			if l.Margin > 0 {
				less = fmt.Sprintf(" less margin %v", l.Margin)
			}
			reason = fmt.Sprintf("%d exceeds the %d tokens burst %d%s plus maxDelay %v can hold: it can never be granted",
				n, (l.Tolerance()+maxDelay)/l.Interval(), l.Burst, less, micros(maxDelay))
		}
		return &ArgumentError{Field: "n", Reason: reason, never: true}
	}
	return nil
}

// Decide applies a request for n tokens, willing to wait up to maxDelay µs
// for its slot, to a bucket whose stored tat is tat (0 for a bucket never
// used), at time now. The caller has checked the request with Check.
func Decide(tat, now int64, l Limit, n int, maxDelay int64) Decision {
	T, tau := l.Interval(), l.Tolerance()
	newTAT := max(tat, now) + int64(n)*T
	// wait is how long after now the slot falls: the last of the n tokens
	// refills τ before newTAT.
	wait := newTAT - tau - now
	if wait > maxDelay {
		// Waiting RetryAfter lowers wait to exactly maxDelay. A denial
		// implies tat > now (an idle bucket grants every checked request),
		// and tat ≥ now + RetryAfter, so max(tat, now) stays tat and the
		// retry-after is exact: granted at now+RetryAfter, denied before.
		return Decision{TAT: tat, RetryAfter: wait - maxDelay, Remaining: Remaining(tat, now, l)}
	}
	return Decision{Allowed: true, TAT: newTAT, Slot: now + max(wait, 0), Remaining: Remaining(newTAT, now, l)}
}

// Fit is how many of n tokens, one emission interval apart, a bucket with
// the given tat can book at now with every slot within maxDelay: the
// largest k ≤ n with max(tat, now) + k·T − τ ≤ now + maxDelay, or 0.
func Fit(tat, now int64, l Limit, n int, maxDelay int64) int {
	room := now + maxDelay + l.Tolerance() - max(tat, now)
	if room < l.Interval() {
		return 0
	}
	return int(min(int64(n), room/l.Interval()))
}

// Slots lists the k slots of a batch whose write left tat at newTAT: the
// i-th token refills τ before newTAT − (k−1−i)·T, and none is earlier than
// now. They are T apart once past now, in order.
func Slots(newTAT, now int64, l Limit, k int) []int64 {
	slots := make([]int64, k)
	for i := range slots {
		slots[i] = max(newTAT-int64(k-1-i)*l.Interval()-l.Tolerance(), now)
	}
	return slots
}

// Remaining is the number of whole tokens in a bucket with the given tat at
// now: (τ − (tat − now)) / T, clamped to [0, Capacity].
func Remaining(tat, now int64, l Limit) int {
	ahead := tat - now
	if ahead <= 0 {
		return l.Capacity()
	}
	free := l.Tolerance() - ahead
	if free <= 0 {
		return 0
	}
	return int(free / l.Interval())
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// Penalty is the tat that empties the bucket until `until` and lets it refill
// gradually after it, as if every token had been spent at that moment. A
// vendor's Retry-After thus stops the whole fleet, and the burst after it is
// earned back at the normal rate rather than released all at once.
func Penalty(until int64, l Limit) int64 { return until + l.Tolerance() }
