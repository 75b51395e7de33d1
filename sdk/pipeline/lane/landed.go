package lane

import (
	"math/rand/v2"
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
//   - Finish and Release release the lane, each only with nothing else
//     pending: no owner and nothing pending (leftReleased). A change
//     marked since gives the lane an owner with its elements (Mark), so
//     no later write leaves that state; whoever released it, what the
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

// leftReleased reports whether p is a lane as Finish's or Release's write
// leaves it: no owner and nothing pending.
func leftReleased(p Pending) bool {
	return p.Owner == "" && len(p.Elements) == 0
}
