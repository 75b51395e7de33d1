package syncer

import "fmt"

// lastReceive is the reason to dead-letter m, a deferred job, before it
// works: the queue hands it out for the last time its redrive policy
// allows (MaxReceives); "" otherwise.
//
// Each receive before this one ended with the message left on the queue:
// its invocation died or timed out (a push running to its budget through
// a vendor's hang is killed by whatever ends the invocation first). Should
// this one end so too, SQS moves the message to the dead-letter queue
// with no reason, the lane still held under the job's token: nothing
// lists it for the sweep (only a dead letter's Abandon does), the jobs
// that come back for it (rechecks) find it owned, and its changes wait
// for the lane's next change, however long, or an operator's redrive
// (adversary seed 44: 11 of a lane's days still stale 2 h 43 min in). So the job
// gives up first, as any dead-lettered lane job: Abandon ends its lease
// and lists the lane (one write; if an earlier receive's claim holds the
// lane, under a token the job never heard of, it lists the lane whoever
// holds it: strand), the dead letter says why, and the sweep pushes
// everything pending within SweepInterval, under a job of its own whose
// receives start over. The lane counts a failure, so a lane whose pushes
// keep killing their invocations is swept later each time
// (lane.SweepBackoff), not every SweepInterval; its first time is at once.
//
// Working first would keep the attempt, but a death would leave the
// message to the redrive, with no reason. A death before even this
// hand-over's write (50 ms in, beside a slow store) still does: the lane
// then reaches the sweep from the listing the write that deferred the job,
// or an earlier receive's claim, made for its lease's end (Hold,
// lane.Store.Renew and ClaimAfter). A message received fewer times costs
// nothing: the check reads the count the event carries.
func (s *Syncer) lastReceive(m Message) string {
	if !m.Deferred || s.MaxReceives <= 0 || m.Receives < s.MaxReceives {
		return ""
	}
	return fmt.Sprintf("last receive (%d of maxReceiveCount %d): its invocations died or timed out; "+
		"dead-lettered before it works, its lane handed to the sweep (no redrive needed)", m.Receives, s.MaxReceives)
}
