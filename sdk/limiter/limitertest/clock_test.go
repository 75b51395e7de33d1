package limitertest

import (
	"context"
	"testing"
	"time"
)

// The clock moves only when told: Advance by a step, Set to a time (back
// too), Sleep by its duration if it is more than nothing and its context
// has not ended.
func TestClockMovesOnlyWhenTold(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		move    func(c *Clock) error
		want    time.Duration // from t0
		wantErr error
	}{
		{"nothing", func(*Clock) error { return nil }, 0, nil},
		{"Advance", func(c *Clock) error { c.Advance(3 * time.Second); return nil }, 3 * time.Second, nil},
		{"Set ahead", func(c *Clock) error { c.Set(t0.Add(time.Minute)); return nil }, time.Minute, nil},
		{"Set back", func(c *Clock) error { c.Advance(time.Minute); c.Set(t0.Add(-time.Second)); return nil }, -time.Second, nil},
		{"Sleep", func(c *Clock) error { return c.Sleep(context.Background(), 250*time.Millisecond) }, 250 * time.Millisecond, nil},
		{"Sleep for less than nothing", func(c *Clock) error { return c.Sleep(context.Background(), -time.Second) }, 0, nil},
		{"Sleep on an ended context", func(c *Clock) error { return c.Sleep(ended, time.Second) }, 0, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock(t0)
			err := tt.move(c)
			if got := c.Now().Sub(t0); got != tt.want || err != tt.wantErr {
				t.Errorf("the clock reads t0 + %v (%v), want t0 + %v (%v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
