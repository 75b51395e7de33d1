package dispatch

import (
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// A job may use its slot late by at most its bucket's margin: later, its
// request would reach the vendor beside slots granted since, past what the
// margin keeps free; with no margin, by half the burst's refill, but never
// under one emission interval rather than the process's own latency.
// Figures by hand: burst 8 at 4/s has 7 × 250 ms / 2 = 875 ms of slack;
// 20/s has an interval of 50 ms, and a burst of 2 there 25 ms of slack.
func TestGraceIsBoundedByTheMargin(t *testing.T) {
	withMargin := func(l limiter.Limit, m time.Duration) limiter.Limit { l.Margin = m; return l }
	tests := []struct {
		name  string
		limit limiter.Limit
		grace time.Duration // the policy's
		want  time.Duration
	}{
		{"no margin: half the burst's refill", limiter.PerSecond(4, 8), time.Minute, 875 * time.Millisecond},
		{"no margin: one interval, even under the process's own latency", limiter.PerSecond(20, 1), time.Minute, 50 * time.Millisecond},
		{"no margin: one interval over a shorter half burst", limiter.PerSecond(20, 2), time.Minute, 50 * time.Millisecond},
		{"no margin: the policy's grace below it", limiter.PerSecond(4, 8), 150 * time.Millisecond, 150 * time.Millisecond},
		{"a margin caps it", withMargin(limiter.PerSecond(4, 8), 250*time.Millisecond), time.Minute, 250 * time.Millisecond},
		{"a margin above the slack changes nothing", withMargin(limiter.PerSecond(4, 8), 2*time.Second), time.Minute, 875 * time.Millisecond},
		{"never under the process's own latency", withMargin(limiter.PerSecond(4, 8), 20*time.Millisecond), time.Minute, 100 * time.Millisecond},
		{"the policy's grace below both", withMargin(limiter.PerSecond(4, 8), 250*time.Millisecond), 150 * time.Millisecond, 150 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Dispatcher{Policy: Policy{Grace: tt.grace}}
			if got := d.grace(tt.limit); got != tt.want {
				t.Errorf("grace = %v, want %v", got, tt.want)
			}
		})
	}
}
