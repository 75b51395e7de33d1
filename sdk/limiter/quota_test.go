package limiter

import (
	"context"
	"errors"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// Refused with an *ArgumentError before anything is sent.
func TestTakeWithQuotaRefusesBeforeSending(t *testing.T) {
	l, err := New(unreachable{t})
	if err != nil {
		t.Fatal(err)
	}
	q := QuotaBucket{Key: "k", Quota: gcra.Quota{Count: 5, Period: gcra.Day}}
	ok := Bucket{Key: "k", Limit: PerSecond(1, 2)}
	adaptive := ok
	adaptive.Adaptive = &Adaptive{}
	for _, tt := range []struct {
		name    string
		buckets []Bucket
		q       QuotaBucket
		n       int
		field   string
	}{
		{"no bucket", nil, q, 1, "buckets"},
		{"an adaptive bucket", []Bucket{adaptive}, q, 1, "bucket.adaptive"},
		{"no quota count", []Bucket{ok}, QuotaBucket{Key: "k", Quota: gcra.Quota{Period: gcra.Day}}, 1, "quota.count"},
		{"n over the quota", []Bucket{{Key: "k", Limit: PerSecond(1, 9)}}, q, 6, "n"},
	} {
		_, err := l.TakeWithQuota(context.Background(), tt.buckets, tt.q, tt.n, "job")
		var ae *ArgumentError
		if !errors.As(err, &ae) || ae.Field != tt.field {
			t.Errorf("%s: %v, want an *ArgumentError on %q", tt.name, err, tt.field)
		}
	}
}
