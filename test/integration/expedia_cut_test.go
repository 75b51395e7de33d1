package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// expediaVendor imitates Expedia's rule with its own arithmetic (a
// sliding-window log and a calendar in its own zone, nothing from
// sdk/gcra): perMinute requests in any 60 s, cut to a fifth once the day's
// count (in Los Angeles) reaches daily, until the local midnight. Every
// answer publishes the minute's limit and what is left of it
// (EG-Rate-Limit-Minute, EG-Rate-Limit-Remaining-Minute).
type expediaVendor struct {
	clock            *limitertest.Clock
	perMinute, daily int
	zone             *time.Location

	mu        sync.Mutex
	day       string
	count     int
	log       []time.Time // accepted, in the last minute
	accepted  []time.Time
	throttled []time.Time
}

func (v *expediaVendor) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.clock.Now()
	if d := now.In(v.zone).Format("2006-01-02"); d != v.day {
		v.day, v.count = d, 0
	}
	limit := v.perMinute
	if v.count >= v.daily {
		limit = v.perMinute / 5
	}
	for len(v.log) > 0 && !v.log[0].After(now.Add(-time.Minute)) {
		v.log = v.log[1:]
	}
	w.Header().Set("EG-Rate-Limit-Minute", strconv.Itoa(limit))
	if len(v.log) >= limit {
		v.throttled = append(v.throttled, now)
		wait := v.log[len(v.log)-limit].Add(time.Minute).Sub(now)
		w.Header().Set("EG-Rate-Limit-Remaining-Minute", "0")
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	v.log = append(v.log, now)
	v.accepted = append(v.accepted, now)
	v.count++
	w.Header().Set("EG-Rate-Limit-Remaining-Minute", strconv.Itoa(limit-len(v.log)))
	w.WriteHeader(http.StatusOK)
}

// in counts what the vendor accepted in [from, to).
func (v *expediaVendor) in(from, to time.Time) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, t := range v.accepted {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// Expedia cuts the per-minute limit by 80% once the daily quota is spent,
// until its midnight. The endpoint's adaptive limit with the eg-rate-limit
// headers expresses it: the first answer after the cut publishes the lower
// limit and the fleet drops to it at once (one 429 at the cut, as the
// vendor's minute is already full); through the rest of the day it keeps
// the fifth, nearly all of it used; after the vendor's midnight the
// published limit rises and the fleet climbs back to the full rate.
//
// The fleet's own "quota" key is for vendors that stop at their quota
// (Hotelbeds' evaluation keys): taken in one transaction with fixed
// limits, it cannot be combined with an adaptive one, and Expedia does not
// stop.
func TestExpediaCutAfterTheDailyQuotaIsFollowedByTheAdaptiveLimit(t *testing.T) {
	t.Parallel()
	table := emulator.NewTable(t, emulator.DynamoDB(t))
	clock := newClock()
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	const perMinute, daily = 60, 150
	v := &expediaVendor{clock: clock, perMinute: perMinute, daily: daily, zone: la}
	srv := httptest.NewServer(v)
	defer srv.Close()

	w := newWorker(t, table, limiter.WithClock(clock.Now))
	rate := float64(perMinute) / 60
	b := limiter.Bucket{Key: "expedia#c1#rates", Limit: limiter.PerSecond(rate, 1),
		Adaptive: &limiter.Adaptive{MinRate: rate / 16, Quiet: time.Minute, Increase: rate / 20}}
	sig := otapush.Signals{Statuses: []int{http.StatusTooManyRequests}, Headers: []otapush.HeaderSpec{{Preset: otapush.PresetEG}}}
	pusher, err := otapush.New(srv.Client(), w.Limiter, otapush.Policy{MaxAttempts: 1, MaxElapsed: time.Minute, BaseBackoff: time.Second,
		MaxBackoff: time.Second, DefaultRetryAfter: time.Second, MaxRetryAfter: time.Hour},
		otapush.WithClock(clock.Now), otapush.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}

	start := time.Date(2026, 11, 30, 23, 52, 0, 0, la)
	// The new day's quota lasts until about 00:02:50: stop before it.
	end := time.Date(2026, 12, 1, 0, 2, 30, 0, la)
	clock.Set(start)
	ctx := context.Background()
	for i := 0; clock.Now().Before(end); i++ {
		r, err := w.Take(ctx, b, 1)
		if wait, denied := limiter.RetryAfter(err); denied {
			clock.Advance(max(wait, time.Millisecond))
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		_, err = pusher.Push(ctx, otapush.Request{Bucket: b, URL: srv.URL, JobID: fmt.Sprint("job-", i), Body: []byte(`{}`),
			Reserved: true, Slot: r.Slot, Stamp: stampOf(r), Signals: &sig})
		var later *otapush.DeferError
		if err != nil && !errors.As(err, &later) {
			t.Fatal(err)
		}
		clock.Advance(10 * time.Millisecond) // the request's own time
	}

	v.mu.Lock()
	throttled, accepted := len(v.throttled), len(v.accepted)
	cut := v.accepted[daily-1] // the quota's last request: the cut starts after it
	v.mu.Unlock()
	midnight := time.Date(2026, 12, 1, 0, 0, 0, 0, la)
	if throttled != 1 {
		t.Errorf("the vendor answered %d 429s, want 1 (at the cut, its minute already full)", throttled)
	}
	// After the cut the vendor allows perMinute/5 a minute; its minute
	// was full at the cut, so count from a minute after it.
	from := cut.Add(time.Minute)
	minutes := midnight.Sub(from).Minutes()
	got, allowed := v.in(from, midnight), int(minutes*perMinute/5)
	if got > allowed+perMinute/5 || float64(got) < 0.8*minutes*perMinute/5 {
		t.Errorf("between the cut and midnight the fleet pushed %d in %.1f min, want about %d (a fifth of %d/min)", got, minutes, allowed, perMinute)
	}
	// After midnight the published limit is whole again: the fleet
	// climbs back at once (a raised cap resumes the climb), and pushes
	// at the full rate in the second minute of the day (at least 90%).
	if n := v.in(midnight.Add(time.Minute), midnight.Add(2*time.Minute)); n < perMinute*9/10 || n > perMinute {
		t.Errorf("in the second minute after the reset the fleet pushed %d, want %d to %d (the full rate)", n, perMinute*9/10, perMinute)
	}
	t.Logf("%d accepted, %d throttled; quota spent at %v, %d pushed between a minute after the cut and midnight (%.1f min), %d in the second minute after it",
		accepted, throttled, cut.In(la).Format("15:04:05"), got, minutes, v.in(midnight.Add(time.Minute), midnight.Add(2*time.Minute)))
}
