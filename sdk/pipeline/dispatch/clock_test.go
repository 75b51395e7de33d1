package dispatch

import (
	"context"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/internal/ctxsleep"
)

// clock is what a test's parts read and sleep on: limitertest's Clock,
// which moves only when told or slept on, or bubbleClock in a synctest
// bubble.
type clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// bubbleClock is a synctest bubble's clock, on which a limiter.LeaseGate's
// timers run too. limitertest's Clock cannot stand in for it: the
// bubble's time moves when every goroutine in it waits, timers and all,
// not when the test says.
type bubbleClock struct{}

func (bubbleClock) Now() time.Time { return time.Now() }

func (bubbleClock) Sleep(ctx context.Context, d time.Duration) error { return ctxsleep.Sleep(ctx, d) }
