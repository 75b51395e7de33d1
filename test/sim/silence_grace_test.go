package sim

import (
	"fmt"
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
		v.retryAfter(http.Header{}, key, t0.Add(at), 0, time.Second)
		ss := v.silences[key]
		return answer{key: key, silence: ss[len(ss)-1]}
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
		refused   int     // requests refused for an unmapped room
		distinct  bool    // each a body not refused before
		wantDrain time.Duration
	}{
		{"fewer silences than the drain holds", 4, 4 * time.Hour, 0, 0, false, 4 * time.Hour},
		{"more silences than the drain holds", 17, 4 * time.Hour, 0, 0, false, 17*each + 10*time.Minute},
		// Each silence is waited out by a deferral of its length, which
		// SQS may deliver late by a tenth of it (seed 358: 15-76 s after
		// each of 16 silences, past the 10 minutes the drain kept over).
		{"silences waited out by late deliveries", 17, 4 * time.Hour, 0.1, 0, false, 17*each + 17*each/10 + 10*time.Minute},
		{"silences past a day", 100, 4 * time.Hour, 0, 0, false, maxSilenceDrain},
		// An isolation that gets one request through a silence drains
		// past the day, a silence for each step (seed 358's whole case:
		// 44-71 h); one that sends the same refused request again is
		// one step, however often it is sent.
		{"silences past a day, an isolation going on", 100, 4 * time.Hour, 0, 40, true, 100*each + 10*time.Minute},
		{"silences past a day, a refused request sent again", 100, 4 * time.Hour, 0, 40, false, maxSilenceDrain + retryAfterCap},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVendor("booking", 0, nil, rand.New(rand.NewPCG(1, 2)), Latency{}, window.Limit{Rate: 0.5, Burst: 1}, nil)
			v.spec.RetryAfter = "huge"
			for i := range tt.silences {
				v.retryAfter(http.Header{}, "a", t0.Add(time.Duration(i)*(retryAfterCap+time.Minute)), 0, time.Second)
			}
			for i := range tt.refused {
				body := "the whole message"
				if tt.distinct {
					body = fmt.Sprintf("part %d", i)
				}
				v.isolated("a", []byte(body))
			}
			s := &sim{sc: Scenario{Drain: tt.drain, Faults: Faults{LateDeliveries: tt.late}}, vendors: []*Vendor{v}}
			if got := s.drainTime(); got != tt.wantDrain {
				t.Errorf("drain %v, want %v", got, tt.wantDrain)
			}
		})
	}
}

// A bucket of burst 1 silenced a quarter hour every few dozen sends
// drains between its silences, in stretches that add up: seed 636's
// busiest bucket (rate 0.5) sent 495 requests between 57 silences, 16
// minutes of sends, and the drain, which had held the silences and 10
// minutes, ended while it still drained. It holds the sends too.
func TestDrainHoldsASilencedBucketsSends(t *testing.T) {
	t0 := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	v := NewVendor("booking", 0, nil, rand.New(rand.NewPCG(1, 2)), Latency{}, window.Limit{Rate: 0.5, Burst: 1}, nil)
	v.spec.RetryAfter = "huge"
	each := retryAfterCap - time.Second // from the answer plus a second
	for i := range 20 {
		v.retryAfter(http.Header{}, "a", t0.Add(time.Duration(i)*(retryAfterCap+time.Minute)), 0, time.Second)
	}
	v.ByKey["a"] = 600 // 20 min at 0.5/s
	v.ByKey["b"] = 900 // never silenced: the case's drain holds it
	s := &sim{sc: Scenario{Drain: time.Hour}, vendors: []*Vendor{v}}
	if got, want := s.drainTime(), 20*each+20*time.Minute+10*time.Minute; got != want {
		t.Errorf("drain %v, want %v (the silences, the sends at 0.5/s and 10 minutes)", got, want)
	}
}
