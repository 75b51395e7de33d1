package unavailable

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// A write the store did not take is asked again every Pause while the
// store is unavailable and the bound allows; any other error, and a sleep
// cut short, end the asks.
func TestRetryAsksAgainWhileTheStoreIsUnavailable(t *testing.T) {
	down := fmt.Errorf("%w: store down", limiter.ErrUnavailable)
	refused := errors.New("AccessDeniedException")
	canceled := errors.New("canceled")
	tests := []struct {
		name      string
		answers   []error // the nth write's; past the end, down
		more      func() bool
		sleepErr  error
		wantAsks  int
		wantPause int
		wantErr   error
	}{
		{"written at once", []error{nil}, Asks(time.Second), nil, 1, 0, nil},
		{"out for two asks", []error{down, down, nil}, Asks(time.Second), nil, 3, 2, nil},
		{"out past a second: 1 + 5 asks", nil, Asks(time.Second), nil, 6, 5, down},
		{"out past 500 ms: 1 + 2 asks", nil, Asks(500 * time.Millisecond), nil, 3, 2, down},
		{"no bound left: one ask", nil, Asks(0), nil, 1, 0, down},
		{"a refusal is not asked again", []error{refused}, Asks(time.Second), nil, 1, 0, refused},
		{"a sleep cut short ends the asks", nil, Asks(time.Second), canceled, 1, 1, down},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asks := 0
			var slept []time.Duration
			err := Retry(context.Background(),
				func(_ context.Context, d time.Duration) error { slept = append(slept, d); return tt.sleepErr },
				tt.more,
				func() error {
					asks++
					if asks <= len(tt.answers) {
						return tt.answers[asks-1]
					}
					return down
				})
			if asks != tt.wantAsks || !errors.Is(err, tt.wantErr) {
				t.Fatalf("asked %d times, returned %v; want %d, %v", asks, err, tt.wantAsks, tt.wantErr)
			}
			if want := slices.Repeat([]time.Duration{Pause}, tt.wantPause); !slices.Equal(slept, want) {
				t.Fatalf("paused %v, want %v", slept, want)
			}
		})
	}
}
