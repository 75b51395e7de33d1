package limitertest

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// InFlightCap is the in-flight cap learned for bucket key, climbed to
// now, as the Limiter's is (limiter.InFlightCap.Effective); 0 when none
// holds. Every process of the fleet shares it at once here: what a
// lowering writes, every later grant's answer would tell. It makes no
// call, as the Limiter's does not.
func (l *Limiter) InFlightCap(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.caps[key].Effective(l.now().UnixMicro())
}

// LowerInFlight records that the vendor throttled a request of bucket
// key, sent at sent, while inFlight requests of it were at the vendor,
// and lowers the learned cap as the Limiter does
// (limiter.InFlightCap.Lowered): to one below the cap in force, or, with
// none, to half of inFlight, never below 1; a request sent before the cap
// was last lowered lowers nothing. A key no bucket may have (empty, say)
// is refused with an *limiter.ArgumentError, as the Limiter refuses it.
func (l *Limiter) LowerInFlight(ctx context.Context, key string, inFlight int, sent time.Time) error {
	defer l.answer(ctx, "LowerInFlight", key)
	if err := l.ask(Call{Op: "LowerInFlight", Key: key, N: inFlight}); err != nil {
		return err
	}
	// The key the Limiter refuses (empty, too long): a bucket's.
	if err := (limiter.Bucket{Key: key, Limit: limiter.PerSecond(1, 1)}).Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if next, ok := l.caps[key].Lowered(l.now().UnixMicro(), sent.UnixMicro(), inFlight); ok {
		l.caps[key] = next
	}
	return nil
}
