package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// slowBegin begins a push in took (a claim and a render on a slow store).
type slowBegin struct {
	*work
	took time.Duration
}

func (w *slowBegin) Begin(ctx context.Context, j job.Job) (job.Job, Payload, error) {
	_ = w.clock.Sleep(ctx, w.took)
	return w.work.Begin(ctx, j)
}

func marginRoute() fixedRoute {
	l := limiter.PerSecond(10, 20)
	l.Margin = 100 * time.Millisecond
	return fixedRoute{Bucket: limiter.Bucket{Key: "k", Limit: l}, URL: "http://ota.invalid"}
}

// The grace is checked as the request leaves: a slot the request reaches
// past its margin (here a grant the store answered late) is left unused
// and the request books a fresh token, since the vendor's window would
// count it beside the slots granted since. Within the margin, the request
// goes on its slot. A slow claim and render do not make it late: the
// work is begun before the slot is booked.
func TestPushPastItsGraceAfterBeginBooksAFreshToken(t *testing.T) {
	tests := []struct {
		begin, grant time.Duration
		reserved     bool
		wasted       int
	}{
		{0, 0, true, 0},
		{0, 100 * time.Millisecond, true, 0},
		{0, 101 * time.Millisecond, false, 1},
		{0, 300 * time.Millisecond, false, 1},
		{300 * time.Millisecond, 0, true, 0},
		{time.Second, 50 * time.Millisecond, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.begin.String()+"+"+tt.grant.String(), func(t *testing.T) {
			r := newRig(t)
			p := &leasePusher{events: &eventLog{}}
			r.d.Routes, r.d.Pusher, r.d.Work = marginRoute(), p, &slowBegin{work: r.work, took: tt.begin}
			r.answer = tt.grant // after the slot of a grant due at once (a slow store's write)
			res, err := r.d.HandleJob(context.Background(), testJob(r.clock.Now()))
			if err != nil || res.Outcome != Pushed {
				t.Fatalf("result %+v, %v; want pushed", res, err)
			}
			if len(p.reserved) != 1 || p.reserved[0] != tt.reserved || res.WastedSlots != tt.wasted {
				t.Fatalf("begun in %v, granted in %v: requests on their held slot %v, %d wasted; want [%v], %d wasted",
					tt.begin, tt.grant, p.reserved, res.WastedSlots, tt.reserved, tt.wasted)
			}
		})
	}
}
