package otapushtest

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// What the vendor answers is what the real client reads: an accepted
// push, a refusal (a *PermanentError with the status and the body's text),
// a failure retried to the policy's MaxAttempts (a *DeferError), and the
// vendor records each request's body and job id.
func TestTheClientReadsTheVendorsAnswers(t *testing.T) {
	b := limiter.Bucket{Key: "k", Limit: limiter.PerSecond(10, 10)}
	tests := []struct {
		name     string
		answer   Answer
		requests int
		check    func(err error) bool
	}{
		{"accepted", Answer{}, 1, func(err error) bool { return err == nil }},
		{"refused", Answer{Status: http.StatusBadRequest, Body: "no such room"}, 1, func(err error) bool {
			var perm *otapush.PermanentError
			return errors.As(err, &perm) && perm.Status == http.StatusBadRequest
		}},
		{"failing", Answer{Status: http.StatusServiceUnavailable}, otapush.DefaultPolicy.MaxAttempts, func(err error) bool {
			var later *otapush.DeferError
			return errors.As(err, &later) && later.Status == http.StatusServiceUnavailable
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := limitertest.NewClock(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC))
			lim := limitertest.New(limitertest.WithClock(clock.Now), limitertest.WithSleep(clock.Sleep))
			vendor := NewVendor(t, func(Request) Answer { return tt.answer })
			client := NewClient(t, lim, clock.Now, clock.Sleep)
			_, err := client.Push(t.Context(), otapush.Request{Bucket: b, URL: vendor.URL, JobID: "j1", Body: []byte(`{"n":1}`)})
			if !tt.check(err) {
				t.Fatalf("Push = %v (%T), not the answer's error", err, err)
			}
			got := vendor.Received()
			if len(got) != tt.requests || got[0].Body != `{"n":1}` || got[0].JobID != "j1" {
				t.Fatalf("the vendor received %+v, want %d requests of the body and job id sent", got, tt.requests)
			}
		})
	}
}

// A shadow route's request goes at once, every attempt: it draws no token
// of a bucket the shadow pushes booked far ahead (what enforcement would
// have waited for), neither for a push the caller did not reserve (a
// later message) nor for a retry. A request that is not shadow waits.
func TestShadowRequestDrawsNoToken(t *testing.T) {
	b := limiter.Bucket{Key: "k", Limit: limiter.PerSecond(10, 10)}
	for _, tt := range []struct {
		name     string
		shadow   bool
		requests int
		waits    int
	}{
		{"shadow: at once, its retry too", true, 2, 0},
		{"enforced: each attempt waits for its token", false, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := limitertest.NewClock(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC))
			lim := limitertest.New(limitertest.WithClock(clock.Now), limitertest.WithSleep(clock.Sleep))
			if err := lim.BookAhead(b, clock.Now().Add(10*time.Minute)); err != nil {
				t.Fatal(err)
			}
			n := 0
			vendor := NewVendor(t, func(Request) Answer {
				if n++; n == 1 {
					return Answer{Status: http.StatusServiceUnavailable}
				}
				return Answer{}
			})
			client := NewClient(t, lim, clock.Now, clock.Sleep)
			start := clock.Now()
			_, err := client.Push(t.Context(), otapush.Request{Bucket: b, URL: vendor.URL, JobID: "j1", Body: []byte(`{}`), Tokens: 3, Shadow: tt.shadow})
			waits := 0
			for _, c := range lim.Calls() {
				if c.Op == "Wait" {
					waits++
				}
			}
			if got := len(vendor.Received()); got != tt.requests || waits != tt.waits {
				t.Fatalf("Push = %v after %v: %d requests, %d waits for a token; want %d and %d", err, clock.Now().Sub(start), got, waits, tt.requests, tt.waits)
			}
			if tt.shadow && err != nil {
				t.Fatalf("Push = %v, want the retry accepted", err)
			}
		})
	}
}
