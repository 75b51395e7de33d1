package dispatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A shadow push on an endpoint metered by items goes at once, whatever
// tokens its bucket has: one whose bucket has no token within the
// reservation's reach (a vendor's silence) was let through with no tokens, found its one item
// at weight 2 unpaid, and was deferred to book its tokens, to come back
// at once and meet the same, until max_deferrals expired it (adversary
// seed 800). A request larger than one instant may take is still cut to
// fit: the vendor could never take it.
func TestShadowItemsPushGoesAtOnceWhateverItsTokens(t *testing.T) {
	tests := []struct {
		name      string
		items     int
		wantItems []int
	}{
		{"one item, two tokens, none free", 1, []int{1}},
		{"more than the burst pays for at one instant: cut to fit", 30, []int{10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := limitertest.NewClock(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC))
			vendor := &itemsVendor{clock: c}
			route := itemsRoute
			route.ItemWeight, route.Shadow, route.LocalShare = 2, true, false
			// No token within MaxReserve (SQS's longest delay, 15
			// minutes): the reservation is refused, and lets the shadow
			// push through with none.
			lim := bucketAt(t, c, route.Bucket, time.Hour)
			d := &worker{&Dispatcher{Limiter: lim, Pusher: vendor, Queue: &fakeQueue{},
				Policy: DefaultPolicy, Now: c.Now, Sleep: c.Sleep, Can: reserveAndBatch(lim)}, itemsWork{items: tt.items}, fixedRoute(route)}
			j := job.Job{ID: "lane@t", Channel: "bk", Credential: "c", Endpoint: "rates", FirstSeen: c.Now()}
			res, err := d.HandleJob(t.Context(), j)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != Pushed || fmt.Sprint(vendor.items) != fmt.Sprint(tt.wantItems) {
				t.Fatalf("%s (%s), the vendor got requests of %v items; want pushed at once, %v", res.Outcome, res.Reason, vendor.items, tt.wantItems)
			}
		})
	}
}
