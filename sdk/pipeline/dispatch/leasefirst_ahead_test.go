package dispatch

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// A push that took its lease first books its token at the clock's now,
// not a store answer ahead (reserveAhead), and spends it at once under
// the lease. The route is BenchmarkPipelineLeaseThroughput's (1000/s,
// burst 100: a grace of 49.5 ms); the dispatcher has learned that grants
// take up to 200 ms (its lead is 250 ms), and this grant takes 20 ms.
// Booked ahead, the slot lay 230 ms past the answer: the lease went back
// while the push slept to it, and was acquired again at the slot, two
// lease writes for nothing; with another process waiting for the set, as
// in the benchmark, that process took the lease meanwhile, the push
// waited for it past its slot's grace, and its request booked a second
// token (Reserved false). A push whose lease is likely free books its
// token first, and ahead, as before.
func TestLeaseFirstTokenIsNotBookedAhead(t *testing.T) {
	f := limiter.InFlight{Key: "k", Max: 1, Hold: time.Minute, Timeout: 100 * time.Millisecond}
	tests := []struct {
		name      string
		contended bool
		// rival: another process asks for the lease 1 ms in, and holds
		// it this long once it has it.
		rival  time.Duration
		events string // not asked with a rival, whose calls are among them
		writes int    // the limiter's bookings and the lease set's writes
		ahead  time.Duration
	}{
		{name: "contended: the lease, then a token at once, spent under it", contended: true,
			events: "acquire,push,release", writes: 3},
		{name: "contended, another process waiting: the lease is not handed to it before the push", contended: true, rival: time.Second},
		{name: "free: the token first, booked ahead by the grants' lead", contended: false,
			events: "acquire,push,release", writes: 3, ahead: 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, synctestRun(func(t *testing.T) {
			r := newLeaseRig(t)
			if tt.contended {
				// Another push of the process goes for the lease too:
				// more than its max.
				r.d.Leases.going["k"] = f.Max
			}
			var rival sync.WaitGroup
			defer rival.Wait()
			if tt.rival > 0 {
				other := limiter.NewLeaseGate(r.store)
				rival.Go(func() {
					time.Sleep(time.Millisecond)
					if l, err := other.Wait(context.Background(), f, time.Minute); err == nil {
						time.Sleep(tt.rival)
						_ = other.Release(context.Background(), l)
					}
				})
			}
			r.d.Can.Ahead = r.lim.ReserveAhead
			r.d.granting.observe(200 * time.Millisecond)
			r.slow = map[string]time.Duration{"ReserveAhead": 20 * time.Millisecond}
			p := &leasePusher{events: r.ev}
			r.d.Routes = fixedRoute{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(1000, 100)}, URL: "http://ota.invalid", InFlight: &f}
			r.d.Pusher, r.d.Work = p, nil
			leaseWrites := len(r.store.Calls())
			start := r.clock.Now()
			res, err := r.d.HandleJob(context.Background(), testJob(start))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.ev.String(); tt.rival == 0 && got != tt.events {
				t.Errorf("events %s; want %s", got, tt.events)
			}
			bookings := 0
			for _, c := range r.lim.Calls() {
				if c.Op == "ReserveAhead" || c.Op == "Reserve" || c.Op == "Wait" {
					bookings++
				}
			}
			lease := 0
			for _, c := range r.store.Calls()[leaseWrites:] {
				if _, ok := leaseCalls[c.Op]; ok {
					lease++
				}
			}
			if bookings != 1 || (tt.rival == 0 && bookings+lease != tt.writes) {
				t.Errorf("%d bookings and %d lease writes; want one booking, %d writes in all", bookings, lease, tt.writes)
			}
			if res.Outcome != Pushed || res.WastedSlots != 0 || !slices.Equal(p.reserved, []bool{true}) {
				t.Errorf("result %+v, requests on their held slot %v; want pushed on its slot, none wasted", res, p.reserved)
			}
			if got := res.Slot.Sub(start); got != tt.ahead {
				t.Errorf("slot %v after the booking began; want %v", got, tt.ahead)
			}
		}))
	}
}
