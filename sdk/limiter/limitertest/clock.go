package limitertest

import (
	"context"
	"sync"
	"time"
)

// Clock is a fake clock for a Limiter and the code under test: it moves
// only when told (Advance, Set), or when something sleeps on it (Sleep,
// as Wait does).
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t, backwards too: for a test that states its
// scene as times from a start rather than as steps, or replays a scene
// from the same start.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Sleep moves the clock on by d at once, unless ctx has ended. A sleep of
// d ≤ 0 leaves it, as time.Sleep returns at once: sleeping never runs the
// clock back, even when sleepers race for it.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		c.Advance(d)
	}
	return nil
}
