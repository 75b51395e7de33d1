// Package ctxsleep is the sleep of the tools outside the SDK (the mock
// fleet, benchmarks, integration tests): a timer that gives way to its
// context, so no wait outlives the call that asked for it. It is a copy of
// sdk/internal/ctxsleep, which only the SDK's packages may import.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends, and returns ctx's error in that case.
// A d ≤ 0 returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
