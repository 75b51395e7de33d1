package breaker

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrOpen is matched by the error Allow returns while the breaker is open.
var ErrOpen = errors.New("circuit breaker open")

// OpenError says how long the breaker stays open.
type OpenError struct{ RetryAfter time.Duration }

func (e *OpenError) Error() string {
	return fmt.Sprintf("circuit breaker open: store calls paused for %v after repeated failures", e.RetryAfter)
}

func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// Breaker opens after Threshold consecutive failures and stays open for
// Cooldown. After the cooldown it lets calls through again; the first
// failure then reopens it at once (the count is still at the threshold),
// and the first success closes it.
type Breaker struct {
	threshold int
	cooldown  time.Duration

	mu        sync.Mutex
	failures  int
	openUntil time.Time
}

// New returns a breaker; threshold ≥ 1 and cooldown > 0.
func New(threshold int, cooldown time.Duration) (*Breaker, error) {
	if threshold < 1 {
		return nil, fmt.Errorf("breaker threshold is %d, want ≥ 1", threshold)
	}
	if cooldown <= 0 {
		return nil, fmt.Errorf("breaker cooldown is %v, want > 0", cooldown)
	}
	return &Breaker{threshold: threshold, cooldown: cooldown}, nil
}

// Allow returns nil if a call may be made at now, or an *OpenError.
func (b *Breaker) Allow(now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Before(b.openUntil) {
		return &OpenError{RetryAfter: b.openUntil.Sub(now)}
	}
	return nil
}

// Record notes the outcome of a call made at now.
func (b *Breaker) Record(now time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.failures = 0
		return
	}
	b.failures++
	if b.failures >= b.threshold {
		b.openUntil = now.Add(b.cooldown)
	}
}
