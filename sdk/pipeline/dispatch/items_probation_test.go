package dispatch

import (
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A request on an endpoint metered by items is sized to the bucket's
// capacity divided by its probation's spacing (limiter.Spacing): a vendor
// that refused the bucket's first requests after a silence takes smaller
// ones too (adversary seed 1802: every lane's first push after each
// silence over the halved vendor's burst). Never below one item, and a
// job's own Fit still bounds it.
func TestRequestsOnProbationAreSizedToTheSpacedCapacity(t *testing.T) {
	bucket := limiter.Bucket{Key: "booking#c0#rates", Limit: limiter.PerSecond(10, 20)}
	route := Route{Bucket: bucket, ItemWeight: 2}
	tests := []struct {
		name    string
		spacing func(limiter.Bucket) int64 // nil: the limiter cannot say
		fit     int
		want    int // tokens
	}{
		{"no capability: the capacity", nil, 0, 20},
		{"not on probation", func(limiter.Bucket) int64 { return 1 }, 0, 20},
		{"spacing 2: half the capacity", func(limiter.Bucket) int64 { return 2 }, 0, 10},
		{"spacing 32: one item's tokens, not fewer", func(limiter.Bucket) int64 { return 32 }, 0, 2},
		{"a job's Fit below the spaced capacity", func(limiter.Bucket) int64 { return 2 }, 3, 6},
	}
	for _, tt := range tests {
		d := &Dispatcher{Can: Capabilities{Spacing: tt.spacing}}
		if got := d.requestTokens(route, job.Job{Fit: tt.fit}, bucket); got != tt.want {
			t.Errorf("%s: requestTokens = %d, want %d", tt.name, got, tt.want)
		}
	}
}
