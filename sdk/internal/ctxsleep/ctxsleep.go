// Package ctxsleep is the one sleep the SDK uses: a timer that gives way to
// its context, so no wait outlives the call (or Lambda invocation) that
// asked for it. The tools outside the SDK's module have their own copy,
// internal/ctxsleep: an internal package is importable only under its
// parent's path, and the SDK cannot import theirs without requiring the
// root module and its dependencies.
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
