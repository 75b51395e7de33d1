package otapush

import (
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// While the refused shard is on probation, its siblings' silences end
// i/k of a spaced shard interval later each, so that the meter's first
// requests after the silence come one spaced meter interval apart
// (adversary seed 643: three shards of 1/6 s freeing their tokens at one
// instant, a vendor at 1/4 s taking one of them); with no probation they
// end together, and never past limiter.MaxPenalty from now.
func TestSiblingSilencesAreStaggeredOnProbation(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	until := now.Add(15 * time.Minute)
	shard := limiter.Bucket{Key: "booking#c1#availability", Limit: limiter.PerSecond(1.0/6, 1)}
	tests := []struct {
		name    string
		until   time.Time
		i, k    int
		spacing int64
		want    time.Time
	}{
		{"no probation: together", until, 1, 3, 1, until},
		{"spacing 2, second of three: 4 s later", until, 1, 3, 2, until.Add(4 * time.Second)},
		{"spacing 2, third of three: 8 s later", until, 2, 3, 2, until.Add(8 * time.Second)},
		{"spacing 32, near the cap: at the cap", now.Add(limiter.MaxPenalty - time.Second), 2, 3, 32, now.Add(limiter.MaxPenalty)},
	}
	for _, tt := range tests {
		if got := staggered(tt.until, now, shard, tt.i, tt.k, tt.spacing); !got.Equal(tt.want) {
			t.Errorf("%s: staggered = now+%v, want now+%v", tt.name, got.Sub(now), tt.want.Sub(now))
		}
	}
}
