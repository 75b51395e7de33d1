package sim

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// dyingPusher is the vendor's client of invocations that die in their
// push (the share part kills a fifth of invocations in their first 3 s,
// and through a vendor's hang every push runs past that): while armed, a
// push ends its invocation (cancel) and never reaches the vendor.
type dyingPusher struct {
	dispatch.Pusher
	armed, died atomic.Bool
	cancel      context.CancelFunc
}

func (p *dyingPusher) Push(ctx context.Context, req otapush.Request) (otapush.Response, error) {
	if p.armed.Load() {
		p.died.Store(true)
		p.cancel()
		<-ctx.Done()
		return otapush.Response{}, ctx.Err()
	}
	return p.Pusher.Push(ctx, req)
}

// A lane job's message is killed on every receive the deferred queue's
// redrive policy allows: its invocations die at once (before the job's
// claim) or in its push (after it, the lane moved to a token only the dead
// invocation knew). SQS then moves the message to the dead-letter queue
// with no reason, and nothing would come back for the lane: the sweep
// lists only lanes a dead letter gave up. So the job, received for the
// last time, is dead-lettered with the reason before it works and hands
// its lane to the sweep, which pushes the change with no new change.
// (Adversary seed 44: a bulk lane's job killed 5 times during a vendor's
// 30-minute hang; 11 of its days stale 2 h 43 min in.)
func TestALaneJobKilledOnEveryReceiveHandsItsLaneToTheSweep(t *testing.T) {
	for _, tt := range []struct {
		name string
		// inPush: the earlier receives die in the push, after their
		// claims; otherwise at once, before anything.
		inPush bool
	}{
		{"killed at once", false},
		{"killed in its push", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lim := limiter.PerSecond(10, 5)
			pusher := &dyingPusher{}
			m := newMemLanes(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, connconfig.Booking(lim, "", auroraBK1001),
				func(d *dispatch.Dispatcher) { pusher.Pusher, d.Pusher = d.Pusher, pusher })
			m.sy.MaxReceives = maxReceiveCount
			src := newPMSOracle("hotel-aurora")
			const lane = "hotel-aurora#rates#booking_com#cred-1#BK-1001"

			// A booked bucket defers the lane's job: its message is the
			// deferred queue's to kill.
			booked := m.bookRates(lim, 6*time.Second)
			m.changes([]string{src.change("rates", "DBL", "2027-04-01", "2027-04-02", 7)}, 10)
			if len(m.pending) != 1 {
				t.Fatalf("change into a booked bucket: %+v, %d deferred; want its lane job deferred", m.results, len(m.pending))
			}
			j := m.pending[0]
			m.pending = nil
			body, err := job.Encode(j)
			if err != nil {
				t.Fatal(err)
			}

			for n := 1; n <= maxReceiveCount; n++ {
				m.clock.Set(booked.Add(time.Duration(n-1) * visibility))
				if n < maxReceiveCount && !tt.inPush {
					continue // died before it did anything
				}
				ctx, cancel := context.WithCancel(context.Background())
				pusher.cancel = cancel
				pusher.armed.Store(true)
				pusher.died.Store(false)
				outs := m.sy.HandleBatch(ctx, []syncer.Message{{ID: "job", Body: body, Deferred: true, Receives: n}})
				pusher.armed.Store(false)
				cancel()
				if pusher.died.Load() {
					// Gone with its invocation: nothing it would have sent
					// after its death was sent.
					m.sent.take(deferredURL)
					m.sent.take(deadURL)
					continue
				}
				if n < maxReceiveCount {
					t.Fatalf("receive %d: the job did not reach its push: %+v", n, outs)
				}
				m.results = append(m.results, outs[0].Jobs...)
				m.pending = append(m.pending, m.sent.takeJobs(t, deferredURL)...)
			}
			// Past its last receive the queue moves the message on by
			// itself; whatever this test would do with it, the lane is not
			// to depend on it.
			dlq := m.sent.deadLetters(deadURL)

			m.clock.Advance(visibility)
			rep := m.sweep()
			m.drain(100)
			if rep.Lanes != 1 {
				t.Errorf("sweep: %+v, want the lane the job handed over", rep)
			}
			src.assertNewest(t, m.ota, "BK-1001")
			if n := pendingLen(t, m, "hotel-aurora#rates", "booking_com#cred-1#BK-1001"); n != 0 {
				t.Errorf("the lane still has %d pending", n)
			}
			assertLaneDeadLetters(t, dlq, 1, lane)
			for _, reason := range dlq {
				if !strings.Contains(reason, "maxReceiveCount") {
					t.Errorf("dead letter's reason %q, want the receives it had", reason)
				}
			}
		})
	}
}
