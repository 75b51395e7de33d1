package parity

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// outageLimiter grants every read and fails its first `failing` Penalize
// calls with fail, as a store that is out (or refusing) would.
type outageLimiter struct {
	failing int
	fail    error
	asked   int
	told    []time.Time
}

func (l *outageLimiter) Wait(context.Context, limiter.Bucket, int, time.Duration) (limiter.Reservation, error) {
	return limiter.Reservation{}, nil
}

func (l *outageLimiter) Penalize(_ context.Context, _ limiter.Bucket, until time.Time) error {
	l.asked++
	if l.asked <= l.failing {
		return l.fail
	}
	l.told = append(l.told, until)
	return nil
}

// TestAThrottledReadIsRecordedOnceTheStoreAnswers: the vendor's 429 on a
// read reaches the bucket even when the store is out for a few pauses, so
// no other check of the credential reads inside the silence; a store that
// stays out past the read's wait, or refuses outright, ends the read.
func TestAThrottledReadIsRecordedOnceTheStoreAnswers(t *testing.T) {
	const retryAfter = 30 * time.Second
	now := time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		failing   int
		fail      error
		maxWait   time.Duration
		wantAsked int
		wantErr   bool
	}{
		{name: "the store answers on the third ask", failing: 2, fail: limiter.ErrUnavailable, maxWait: time.Minute, wantAsked: 3},
		// Asks at 0, 0.2 and 0.4 s: the next would come past 0.5 s.
		{name: "the store stays out past the read's wait", failing: 100, fail: limiter.ErrUnavailable, maxWait: 500 * time.Millisecond, wantAsked: 3, wantErr: true},
		{name: "a refusal is not asked again", failing: 100, fail: errors.New("AccessDeniedException: not authorized"), maxWait: time.Minute, wantAsked: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reads atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if reads.Add(1) == 1 {
					w.Header().Set("Retry-After", "30")
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				_, _ = w.Write([]byte(`<ProductAvailRateRetrievalRS xmlns="http://www.expediaconnect.com/EQC/PAR/2013/07"><AvailRateList/></ProductAvailRateRetrievalRS>`))
			}))
			defer srv.Close()
			rdr, err := format.ReaderOf(format.ExpediaAR)
			if err != nil {
				t.Fatal(err)
			}
			lim := &outageLimiter{failing: tt.failing, fail: tt.fail}
			// The clock stands still and the pauses are the test's: the
			// asks are bounded by their count, and take no time.
			var slept []time.Duration
			c := &Checker{Limiter: lim, MaxWait: tt.maxWait, Now: func() time.Time { return now },
				Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}
			q := format.ReadQuery{HotelRef: "36900105", From: "2027-06-01", To: "2027-06-02", Secret: format.NewSecret("user:pw")}
			_, _, err = c.read(context.Background(), config.Read{URL: srv.URL, Reader: rdr}, limiter.Bucket{Key: "expedia#c1#read"}, q)
			if lim.asked != tt.wantAsked {
				t.Errorf("Penalize asked %d times, want %d", lim.asked, tt.wantAsked)
			}
			// A pause of 200 ms between asks, as otapush's record pauses:
			// one loop (package unavailable) for both.
			if want := slices.Repeat([]time.Duration{200 * time.Millisecond}, tt.wantAsked-1); !slices.Equal(slept, want) {
				t.Errorf("paused %v between asks, want %v", slept, want)
			}
			if tt.wantErr {
				if err == nil {
					t.Fatal("read succeeded, want the store's error")
				}
				if !errors.Is(err, tt.fail) {
					t.Errorf("error %v does not wrap %v", err, tt.fail)
				}
				return
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if len(lim.told) != 1 || !lim.told[0].Equal(now.Add(retryAfter)) {
				t.Errorf("silences recorded %v, want one until %v", lim.told, now.Add(retryAfter))
			}
		})
	}
}
