package limitertest

import (
	"context"
	"slices"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// WithLatency makes every call's answer come latency(op, key) after the
// call decided it (op and key as WithFault's), slept with the limiter's
// sleep (WithSleep), as a store's answer comes after the now its write
// claimed: a slot granted at once is that much past by the time the
// caller hears of it. Wait and WaitMulti hear of their slot that late and
// sleep what is left until it. KnownSilence, which asks no store, answers
// at once.
func WithLatency(latency func(op, key string) time.Duration) Option {
	return func(l *Limiter) { l.latency = latency }
}

// Call is one call a Limiter was asked: its operation's name and key, as
// WithFault is told of them, and the tokens it asked for (0 for a call
// that asks none; a batch's N; LowerInFlight's requests in flight).
type Call struct {
	Op, Key string
	N       int
	// Limit is the limit of the bucket the call named: zero for a call
	// of no bucket (a lease's, First's, a quota's).
	Limit limiter.Limit
	// MaxDelay is how far ahead the call let its slot lie: the maxDelay
	// of Reserve, ReserveAhead and ReserveMulti, a batch's MaxDelay, the
	// maxWait of Wait and WaitMulti; 0 for every other call.
	MaxDelay time.Duration
}

// Calls is every call asked so far, in order, those a fault answered
// included; a multi-bucket call is one for each bucket. KnownSilence,
// which asks no store, is not one.
func (l *Limiter) Calls() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// ask records call c and asks the fault, if any, for its answer.
func (l *Limiter) ask(c Call) error {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
	if l.fault == nil {
		return nil
	}
	return l.fault(c.Op, c.Key)
}

// answer sleeps the latency of op's answer, if any: call it deferred, so
// that the call decides first.
func (l *Limiter) answer(ctx context.Context, op, key string) {
	if l.latency != nil {
		if d := l.latency(op, key); d > 0 {
			_ = l.sleep(ctx, d)
		}
	}
}
