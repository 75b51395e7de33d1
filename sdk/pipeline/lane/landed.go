package lane

import (
	"math/rand/v2"
	"slices"
	"time"
)

// A conditional write whose answer is lost (a connection reset, a timeout)
// is sent again by the AWS SDK's retryer. If the first copy landed, the
// second finds the lane in the state the first left and fails its
// condition: the write reads as another owner's although it is the
// caller's own. DynamoDB documents this for every conditional write; the
// lane writes below are made safe to retry by recognising, in the item the
// failed condition returns, the state their own write leaves, which no
// other writer can have left:
//   - the sweep's takeover moves the lane to a token fresh to that call,
//     with a lease it computed (tookOver); a claim's callers know their
//     fresh next token (syncer's claim);
//   - EndLease marks the end with a number fresh to the call (endMark);
//   - Finish releases the lane: no owner and nothing of done pending
//     (leftReleased; Release alike). Whoever released it, what the
//     caller asked for holds.

// tookOver reports whether p is the lane as a write that moved it to
// token with a lease until lease left it.
func tookOver(p Pending, token string, lease time.Time) bool {
	return p.Owner == token && p.LeaseUntil.UnixMicro() == lease.UnixMicro()
}

// endMark is the lease EndLease writes: before the Unix epoch, so over for
// every process whatever its clock (as the epoch itself is), and drawn at
// random so that this call's end is told from an earlier call's (a second
// delivery of the same job, which must fail with a *NotOwnerError). 2^52
// values keep it exact in any float a tool reads it as.
func endMark() time.Time {
	return time.UnixMicro(-1 - rand.Int64N(1<<52))
}

// leftReleased reports whether p is a lane Finish's write would leave: no
// owner and none of done pending.
func leftReleased(p Pending, done []Element) bool {
	if p.Owner != "" {
		return false
	}
	for _, e := range done {
		if slices.Contains(p.Elements, e) {
			return false
		}
	}
	return true
}
