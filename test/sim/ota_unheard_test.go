package sim

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
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
		second    time.Duration // if set, a second request this long after the first, with the same timeout
		killed    time.Duration // if set, the first request's invocation dies this long after it was sent
		wantEarly int
	}{
		{"answer heard", 0, 0, 0, 1},
		{"client gave up before the answer", 100 * time.Millisecond, 0, 0, 0},
		// Seed 725: answers in flight at once, each asking a later end,
		// each given up on: the first's silence is not heard either.
		{"two clients gave up, the second's silence ending later", 100 * time.Millisecond, 50 * time.Millisecond, 0, 0},
		// Seed 725 again: an answer heard by an invocation killed before
		// it could write the silence down.
		{"answer heard, its invocation killed within the second after", 0, 0, 600 * time.Millisecond, 0},
		{"answer heard, its invocation killed after the silence began", 0, 0, 1600 * time.Millisecond, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Every request 429s asking 5 s, answered after 500 ms:
				// the silence runs from 1.5 s to 5 s.
				v := NewVendor("booking", 0, nil, rand.New(rand.NewPCG(1, 2)), Latency{P50: 500 * time.Millisecond, P99: 500 * time.Millisecond},
					window.Limit{Rate: 10, Burst: 20}, nil)
				v.spec = VendorSpec{Overload: 1, Penalty: 5 * time.Second}
				tr := &Transport{Vendors: map[string]*Vendor{"booking.sim": v}}
				first := &death{}
				if tt.killed > 0 {
					time.AfterFunc(tt.killed, first.mark)
				}
				send := func(timeout time.Duration) (*http.Response, error) {
					ctx := withDeath(context.Background(), first)
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
				var second sync.WaitGroup
				if tt.second > 0 {
					second.Go(func() {
						time.Sleep(tt.second)
						if _, err := send(tt.gaveUp); err == nil {
							t.Error("second request answered, want its client to give up first")
						}
					})
				}
				resp, err := send(tt.gaveUp)
				second.Wait()
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
