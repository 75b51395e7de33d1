package sim

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// A vendor watches only the silences its client heard: a request whose
// client gave up before the 429 came (a push's budget ending on a slow
// vendor) asked the fleet for nothing, so a request after it is not
// inside a silence (adversary seed 63: a 2 s push budget on a vendor
// answering in seconds, the 429's Retry-After never read, and a request
// counted inside it). A silence whose answer was heard is still watched.
func TestVendorWatchesOnlyTheSilencesItsClientHeard(t *testing.T) {
	for _, tt := range []struct {
		name      string
		gaveUp    time.Duration // the first request's timeout; 0: none
		wantEarly int
	}{
		{"answer heard", 0, 1},
		{"client gave up before the answer", 100 * time.Millisecond, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Every request 429s asking 5 s, answered after 500 ms:
				// the silence runs from 1.5 s to 5 s.
				v := NewVendor("booking", 0, nil, rand.New(rand.NewPCG(1, 2)), Latency{P50: 500 * time.Millisecond, P99: 500 * time.Millisecond},
					window.Limit{Rate: 10, Burst: 20}, nil)
				v.spec = VendorSpec{Overload: 1, Penalty: 5 * time.Second}
				tr := &Transport{Vendors: map[string]*Vendor{"booking.sim": v}}
				send := func(timeout time.Duration) (*http.Response, error) {
					ctx := context.Background()
					if timeout > 0 {
						var cancel context.CancelFunc
						ctx, cancel = context.WithTimeout(ctx, timeout)
						defer cancel()
					}
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://booking.sim/v1/availability",
						strings.NewReader(`{"hotel_ref":"p00000","kind":"availability","items":[]}`))
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Authorization", "Bearer token-TOKEN_BOOKING_0")
					return tr.RoundTrip(req)
				}
				resp, err := send(tt.gaveUp)
				switch {
				case tt.gaveUp == 0 && (err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "5"):
					t.Fatalf("first request: %v %v, want a 429 asking 5 s", resp, err)
				case tt.gaveUp > 0 && err == nil:
					t.Fatalf("first request answered %d, want its client to give up first", resp.StatusCode)
				}
				time.Sleep(2*time.Second - time.Since(v.start))
				if _, err := send(0); err != nil {
					t.Fatal(err)
				}
				if v.Early != tt.wantEarly {
					t.Fatalf("%d requests counted inside a silence (%s), want %d", v.Early, v.FirstEarly, tt.wantEarly)
				}
			})
		})
	}
}
