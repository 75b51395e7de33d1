// Package unavailable asks a limiter write again while the store is
// unavailable: the write that records a vendor's silence (a 429's
// Retry-After) in the limiter, which a process that heard it and could not
// write it would be the only one to know of. otapush's answers and
// parity's reads record their throttles through it; an internal package,
// so that the pause and the loop are one without adding to the limiter's
// API a policy only these two callers follow.
package unavailable

import (
	"context"
	"errors"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Pause is the wait between asks: short against a silence (seconds to
// hours), long against a store call, so that an outage of a few seconds
// costs a few asks, and the first ask after it lands within Pause.
const Pause = 200 * time.Millisecond

// Retry calls write, and again after each Pause (sleep's, so that a test's
// clock moves with it) while write fails with limiter.ErrUnavailable and
// more says another ask is due. It returns write's last error: at once for
// any other error, and when sleep ends early (ctx ended). The caller
// bounds the asks through more, by the clock or by their count.
func Retry(ctx context.Context, sleep func(context.Context, time.Duration) error, more func() bool, write func() error) error {
	for {
		err := write()
		if err == nil || !errors.Is(err, limiter.ErrUnavailable) || !more() {
			return err
		}
		if sleep(ctx, Pause) != nil {
			return err
		}
	}
}

// Asks is a bound for Retry's more of as many asks after the first as
// Pauses fit within d, whatever a clock says: a caller whose clock may
// stand still (an injected one) still stops.
func Asks(d time.Duration) func() bool {
	n := d / Pause
	return func() bool {
		n--
		return n >= 0
	}
}
