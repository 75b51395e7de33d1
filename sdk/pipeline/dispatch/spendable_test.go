package dispatch

import (
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// A slot of one shard is spendable only within the whole bucket's grace
// (one interval of 20/s, 50 ms, with a burst of 2 and no margin), not the
// shard's (one interval of its 10/s, 100 ms): the vendor counts the two
// shards' requests together, and each shard's slot spent up to its own
// interval late beside its next one put four requests in 40 ms at the
// vendor against 20/s, burst 2 (adversary seed 1626). Unsharded, the
// route's bucket is the request's, and nothing changes.
func TestShardSlotIsSpendableOnlyWithinTheWholeBucketsGrace(t *testing.T) {
	whole := limiter.Bucket{Key: "bk#c#rates", Limit: limiter.PerSecond(20, 2)}
	shard := limiter.Bucket{Key: "bk#c#rates␟0", Limit: limiter.PerSecond(10, 1)}
	tests := []struct {
		name   string
		req    limiter.Bucket
		late   time.Duration
		booked bool // the request books a fresh token: the slot is past its grace
	}{
		{"a shard's slot 40 ms late: within the whole bucket's 50 ms", shard, 40 * time.Millisecond, false},
		{"a shard's slot 75 ms late: past the whole bucket's grace, within the shard's own", shard, 75 * time.Millisecond, true},
		{"the bucket's own slot 40 ms late", whole, 40 * time.Millisecond, false},
		{"the bucket's own slot 75 ms late", whole, 75 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := limitertest.NewClock(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC))
			d := &Dispatcher{Policy: DefaultPolicy, Now: c.Now}
			tk := &task{Route: Route{Bucket: whole}}
			req := otapush.Request{Bucket: tt.req, Reserved: true, Slot: c.Now().Add(-tt.late)}
			got, late := d.spendable(tk, req)
			if late != tt.booked || got.Reserved == tt.booked {
				t.Errorf("spendable: late %v, reserved %v; want late %v", late, got.Reserved, tt.booked)
			}
		})
	}
}
