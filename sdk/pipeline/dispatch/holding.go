package dispatch

import (
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// holding is a decision about the slot a job holds (job.Job's Hold), the
// one value each such decision comes to, wherever it is made: decide's to
// give the slot up (decision.Hold: it expired before the job ran, or a
// deferral would outlast it), serve's on a slot a throttle revoked, and a
// booking's slot to take (reserve.go's, linger.go's, a batch's in Run).
// apply carries it out: the one place a job's Hold is written. The zero
// holding leaves the hold as it is.
type holding struct {
	// drop: give up the slot held. take: hold slot instead, booked.
	drop, take bool
	slot       job.Hold
}

// dropped gives up the slot a job holds.
var dropped = holding{drop: true}

// taking holds slot, which a booking granted.
func taking(slot job.Hold) holding { return holding{take: true, slot: slot} }

// apply carries h out on j. A slot taken is when the job is due: what it
// waited for before it (NotBefore: its linger; AskAt: its turn to ask the
// bucket, askers.go) is over.
func (h holding) apply(j *job.Job) {
	switch {
	case h.take:
		j.Hold, j.NotBefore, j.AskAt = h.slot, time.Time{}, time.Time{}
	case h.drop:
		j.Hold = job.Hold{}
	}
}
