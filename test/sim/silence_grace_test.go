package sim

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// A vendor asking a day of each 429 silences its bucket for the client's
// 15 minutes a time: Silenced counts the union of a bucket's heard
// silences, the busiest bucket's, and the drain grants it when the
// scenario's drain is shorter (seed 317: 16 silences of one bucket of burst
// 1, past a 4 h drain).
func TestDrainGrantsTheSilencesTheBusiestBucketMet(t *testing.T) {
	t0 := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	v := NewVendor("booking", 0, nil, rand.New(rand.NewPCG(1, 2)), Latency{}, window.Limit{Rate: 0.5, Burst: 1}, nil)
	v.spec.RetryAfter = "huge"
	ask := func(key string, at time.Duration) answer {
		a := answer{key: key, was: v.quiet[key]}
		v.retryAfter(http.Header{}, key, t0.Add(at), 0, time.Second)
		a.quiet = v.quiet[key]
		return a
	}
	each := retryAfterCap - time.Second // from the answer plus a second
	ask("b", 0)
	ask("a", 0) // 1 s to 15 min
	ask("a", 5*time.Minute)
	ask("a", 16*time.Minute)
	late := ask("a", 20*time.Minute) // to 35 min
	if got, want := v.Silenced(), 35*time.Minute-time.Second; got != want {
		t.Errorf("silenced %v, want %v (the union of bucket a's)", got, want)
	}
	v.unheard(late) // back to 31 min
	if got, want := v.Silenced(), 31*time.Minute-time.Second; got != want {
		t.Errorf("after an unheard answer: silenced %v, want %v", got, want)
	}

	for _, tt := range []struct {
		name      string
		silences  int
		drain     time.Duration
		late      float64 // Faults.LateDeliveries
		wantDrain time.Duration
	}{
		{"fewer silences than the drain holds", 4, 4 * time.Hour, 0, 4 * time.Hour},
		{"more silences than the drain holds", 17, 4 * time.Hour, 0, 17*each + 10*time.Minute},
		// Each silence is waited out by a deferral of its length, which
		// SQS may deliver late by a tenth of it (seed 358: 15-76 s after
		// each of 16 silences, past the 10 minutes the drain kept over).
		{"silences waited out by late deliveries", 17, 4 * time.Hour, 0.1, 17*each + 17*each/10 + 10*time.Minute},
		{"silences past a day", 100, 4 * time.Hour, 0, maxSilenceDrain},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVendor("booking", 0, nil, rand.New(rand.NewPCG(1, 2)), Latency{}, window.Limit{Rate: 0.5, Burst: 1}, nil)
			v.spec.RetryAfter = "huge"
			for i := range tt.silences {
				v.retryAfter(http.Header{}, "a", t0.Add(time.Duration(i)*(retryAfterCap+time.Minute)), 0, time.Second)
			}
			s := &sim{sc: Scenario{Drain: tt.drain, Faults: Faults{LateDeliveries: tt.late}}, vendors: []*Vendor{v}}
			if got := s.drainTime(); got != tt.wantDrain {
				t.Errorf("drain %v, want %v", got, tt.wantDrain)
			}
		})
	}
}
