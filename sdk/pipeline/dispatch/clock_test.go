package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/internal/ctxsleep"
)

// clock is a fake clock that sleeping advances; in a synctest bubble
// (bubble set), the bubble's clock, on which a limiter.LeaseGate's timers
// run too.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	bubble bool
}

func (c *clock) Now() time.Time {
	if c.bubble {
		return time.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// set moves the clock to now, backwards if need be.
func (c *clock) set(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	if c.bubble {
		return ctxsleep.Sleep(ctx, d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return nil
}
