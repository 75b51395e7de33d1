package config

import (
	"fmt"
	"time"
)

// MaxLinger bounds Config.Linger: a lane that waits longer for more
// changes is stale for longer than any merge is worth.
const MaxLinger = 10 * time.Second

// LingerFor is the lane linger the config sets: negative when it sets
// none (the syncer's default applies), zero for no linger.
// A linger pays where lanes see several changes a second (a few busy
// hotels: each push then carries many); at a large fleet's rate a lane
// sees a change a minute or so, a linger merges almost nothing, and each
// lingering push takes a trip through the deferred queue instead of going
// out with its change batch (docs/benchmarks.md, the simulated fleet).
func (c *Config) LingerFor() (time.Duration, error) {
	if c.Linger == "" {
		return -1, nil
	}
	d, err := time.ParseDuration(c.Linger)
	if err != nil || d < 0 || d > MaxLinger {
		return 0, fmt.Errorf("linger: %q, want a Go duration from 0s (none) to %s, or leave it out for the default", c.Linger, MaxLinger)
	}
	return d, nil
}
