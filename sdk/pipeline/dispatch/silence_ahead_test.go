package dispatch

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
)

// A push whose slot was booked ahead asks the bucket's silence
// limiter.SilenceAfter (100 ms) before the slot, as decide wakes it for,
// so that the read's latency delays the check, not the send. Asked at the
// slot, on a 20/s bucket of burst 2 without a margin (a grace of one
// interval, 50 ms), a read of 80 ms wasted the slot: on a loaded emulator
// a batch's pushes then booked again (TestDispatcherBooksABatchWithOneWrite
// in test/integration: 2 writes for 1). A silence the read finds still
// keeps the slot unspent. Figures by hand: the slot is 500 ms after t0,
// the read asked at 400 ms.
func TestSlotBookedAheadAsksItsSilenceBeforeItComes(t *testing.T) {
	ms := time.Millisecond
	route := Route{Bucket: limiter.Bucket{Key: "bk#c#rates", Limit: limiter.PerSecond(20, 2)}, URL: "http://ota.invalid", Header: http.Header{}}
	tests := []struct {
		name     string
		read     time.Duration
		silenced bool // a 429 asked for a silence over the slot before the read
		want     string
	}{
		{"a read shorter than SilenceAfter: on its slot, at it", 80 * ms, false, "pushed: on the held slot true, 0s late, 0 wasted"},
		{"a read past the slot by less than the grace: on its slot", 130 * ms, false, "pushed: on the held slot true, 30ms late, 0 wasted"},
		{"a read past the slot by more than the grace: a fresh token", 160 * ms, false, "pushed: on the held slot false, 0s late, 1 wasted"},
		{"a silence the read finds: the slot is not spent", 80 * ms, true, "deferred: 0 requests, 1 revoked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
			c := limitertest.NewClock(t0)
			// Its silence reads are answered read after they are asked,
			// as a store's are, with the silence as the read found it.
			s := limitertest.New(limitertest.WithClock(c.Now), limitertest.WithSleep(c.Sleep),
				limitertest.WithLatency(func(op, _ string) time.Duration {
					if op != "Silence" {
						return 0
					}
					return tt.read
				}))
			if tt.silenced {
				if err := s.Penalize(t.Context(), route.Bucket, t0.Add(2*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			p := &slotPusher{clock: c}
			d := &worker{&Dispatcher{Limiter: s, Pusher: p, Queue: &fakeQueue{}, Policy: DefaultPolicy, Now: c.Now, Sleep: c.Sleep}, nil, fixedRoute(route)}
			j := testJob(t0)
			j.Payload = []byte(`{}`)
			j.Hold = newHold(t0.Add(500*ms), "", 0, nil, 500*ms) // booked ahead: a batch's later slot
			res, err := d.HandleJob(t.Context(), j)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("%s: %d requests, %d revoked", res.Outcome, len(p.reserved), res.RevokedSlots)
			if len(p.reserved) == 1 {
				late := time.Duration(0)
				if p.reserved[0] {
					late = p.late[0]
				}
				got = fmt.Sprintf("%s: on the held slot %v, %v late, %d wasted", res.Outcome, p.reserved[0], late, res.WastedSlots)
			}
			if got != tt.want {
				t.Errorf("%s; want %s", got, tt.want)
			}
		})
	}
}
