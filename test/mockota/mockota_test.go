package mockota

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

func wantStatus(t *testing.T, r reply, want int, what string) {
	t.Helper()
	if r.status != want {
		t.Fatalf("%s: status %d, want %d (body %s)", what, r.status, want, r.body)
	}
}

// The vendor grants exactly the burst at once, then one request per
// interval, never a microsecond early, and refills no further than the
// burst however long the bucket idles.
func TestLimitEnforcedExactly(t *testing.T) {
	for _, l := range []gcra.Limit{{Rate: 10, Burst: 5}, {Rate: 1, Burst: 1}, {Rate: 0.5, Burst: 3}, {Rate: 3, Burst: 2}} {
		t.Run(fmt.Sprintf("rate=%g,burst=%d", l.Rate, l.Burst), func(t *testing.T) {
			s, c := start(t, Config{Limit: l})
			T := time.Duration(l.Interval()) * time.Microsecond
			n := 0
			take := func(want int) reply {
				t.Helper()
				n++
				r := post(t, s, "cred", "availability", "j"+strconv.Itoa(n))
				wantStatus(t, r, want, fmt.Sprintf("request %d", n))
				return r
			}
			for range l.Burst {
				take(http.StatusOK)
			}
			take(http.StatusTooManyRequests)
			refillsExactly(t, s, c, T, l.Burst, take)
			if got, want := s.Count429(), 8; got != want {
				t.Errorf("Count429: %d, want %d", got, want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	slow := gcra.Limit{Rate: 0.1, Burst: 1} // one token per 10 s
	fast := gcra.Limit{Rate: 10, Burst: 1}  // one token per 100 ms
	// t0 is 03:04:05.25, so a 10 s wait from t0 ends at 03:04:15.25 and
	// the HTTP-date, rounded up, is 03:04:16.
	const date = "Wed, 02 Jan 2030 03:04:16 GMT"
	for _, tc := range []struct {
		name    string
		limit   gcra.Limit
		advance time.Duration // after the first, granted, request
		cfg     Config
		want    string // "" for no header
	}{
		{"seconds full wait", slow, 0, Config{}, "10"},
		{"seconds rounded up", slow, 2500 * time.Millisecond, Config{}, "8"},
		{"seconds almost refilled", slow, 10*time.Second - time.Microsecond, Config{}, "1"},
		{"seconds at least one", fast, 0, Config{}, "1"},
		{"date full wait", slow, 0, Config{RetryAfterHTTPDate: true}, date},
		{"date same instant later", slow, 2500 * time.Millisecond, Config{RetryAfterHTTPDate: true}, date},
		{"date rounded up", fast, 0, Config{RetryAfterHTTPDate: true}, "Wed, 02 Jan 2030 03:04:06 GMT"},
		{"omitted", slow, 0, Config{OmitRetryAfter: true}, ""},
		{"omitted with date", slow, 0, Config{OmitRetryAfter: true, RetryAfterHTTPDate: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Limit = tc.limit
			s, c := start(t, cfg)
			wantStatus(t, post(t, s, "cred", "rates", "first"), http.StatusOK, "first")
			c.Advance(tc.advance)
			r := post(t, s, "cred", "rates", "second")
			wantStatus(t, r, http.StatusTooManyRequests, "second")
			got, present := r.header.Get("Retry-After"), len(r.header.Values("Retry-After")) > 0
			if got != tc.want || present != (tc.want != "") {
				t.Fatalf("Retry-After %q (present %v), want %q", got, present, tc.want)
			}
			if cfg.RetryAfterHTTPDate && tc.want != "" {
				// Obeying the date must never be early.
				at, err := http.ParseTime(got)
				if err != nil {
					t.Fatalf("ParseTime(%q): %v", got, err)
				}
				earliest := t0.Add(time.Duration(tc.limit.Interval()) * time.Microsecond)
				if at.Before(earliest) {
					t.Fatalf("Retry-After %v is before the refill at %v", at, earliest)
				}
			}
		})
	}
}

func TestHiddenLimit(t *testing.T) {
	t.Run("stricter hidden limit refuses, published bucket untouched", func(t *testing.T) {
		s, _ := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 5}, HiddenLimit: &gcra.Limit{Rate: 1, Burst: 2}})
		for i := range 2 {
			wantStatus(t, post(t, s, "cred", "rates", fmt.Sprint("ok", i)), http.StatusOK, "within hidden burst")
		}
		for i := range 10 {
			r := post(t, s, "cred", "rates", fmt.Sprint("denied", i))
			wantStatus(t, r, http.StatusTooManyRequests, "beyond hidden burst")
			// The published bucket still shows 3 tokens: the vendor does
			// not reveal the hidden limit, and its denials charge nothing.
			if got := r.header.Get("X-RateLimit-Remaining"); got != "3" {
				t.Fatalf("X-RateLimit-Remaining %q, want 3", got)
			}
			if got := r.header.Get("Retry-After"); got != "1" {
				t.Fatalf("Retry-After %q, want 1", got)
			}
		}
	})
	t.Run("published denial does not drain the hidden bucket", func(t *testing.T) {
		s, c := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 2}, HiddenLimit: &gcra.Limit{Rate: 0.5, Burst: 3}})
		for i := range 2 {
			wantStatus(t, post(t, s, "cred", "rates", fmt.Sprint("ok", i)), http.StatusOK, "within published burst")
		}
		for i := range 10 {
			wantStatus(t, post(t, s, "cred", "rates", fmt.Sprint("denied", i)), http.StatusTooManyRequests, "beyond published burst")
		}
		// One published token has refilled; the hidden bucket still has
		// exactly one (3 − 2 granted, + 1 s·0.5 not yet a whole one) only
		// if the ten denials charged it nothing.
		c.Advance(time.Second)
		wantStatus(t, post(t, s, "cred", "rates", "after"), http.StatusOK, "after refill")
	})
	t.Run("both deny: Retry-After is the later wait", func(t *testing.T) {
		s, _ := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 1}, HiddenLimit: &gcra.Limit{Rate: 0.25, Burst: 1}})
		wantStatus(t, post(t, s, "cred", "rates", "a"), http.StatusOK, "first")
		r := post(t, s, "cred", "rates", "b")
		wantStatus(t, r, http.StatusTooManyRequests, "second")
		if got := r.header.Get("Retry-After"); got != "4" {
			t.Fatalf("Retry-After %q, want 4", got)
		}
	})
}

// Buckets are per (credential, endpoint), with per-endpoint limits, and the
// headers describe the published bucket of the request.
func TestBucketsAndHeaders(t *testing.T) {
	s, _ := start(t, Config{
		Limit:  gcra.Limit{Rate: 1, Burst: 3},
		Limits: map[string]gcra.Limit{"rates": {Rate: 1, Burst: 2}},
	})
	for _, tc := range []struct {
		cred, endpoint string
		status         int
		limit, remain  string
	}{
		{"a", "availability", 200, "3", "2"},
		{"a", "availability", 200, "3", "1"},
		{"a", "availability", 200, "3", "0"},
		{"a", "availability", 429, "3", "0"},
		{"b", "availability", 200, "3", "2"},
		{"a", "rates", 200, "2", "1"},
		{"a", "rates", 200, "2", "0"},
		{"a", "rates", 429, "2", "0"},
		{"a", "restrictions", 200, "3", "2"},
	} {
		what := tc.cred + "/" + tc.endpoint
		r := post(t, s, tc.cred, tc.endpoint, "job")
		wantStatus(t, r, tc.status, what)
		if got := r.header.Get("X-RateLimit-Limit"); got != tc.limit {
			t.Errorf("%s: X-RateLimit-Limit %q, want %q", what, got, tc.limit)
		}
		if got := r.header.Get("X-RateLimit-Remaining"); got != tc.remain {
			t.Errorf("%s: X-RateLimit-Remaining %q, want %q", what, got, tc.remain)
		}
		if got := r.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("%s: Content-Type %q", what, got)
		}
	}

	t.Run("omitted", func(t *testing.T) {
		s, _ := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 1}, OmitRateLimitHeaders: true})
		for _, want := range []int{200, 429} {
			r := post(t, s, "a", "rates", "j")
			wantStatus(t, r, want, "omitted headers")
			for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining"} {
				if v := r.header.Values(h); len(v) > 0 {
					t.Errorf("%d: %s %q, want none", want, h, v)
				}
			}
		}
	})
}

// However many clients race, the vendor grants exactly what each bucket
// holds while the clock stands still.
func TestConcurrentFrozenClock(t *testing.T) {
	limit := gcra.Limit{Rate: 1, Burst: 20}
	s, _ := start(t, Config{Limit: limit, Credentials: []string{"a", "b"}})
	const workers, each = 50, 4
	creds, endpoints := []string{"a", "b"}, []string{"availability", "rates"}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				job := fmt.Sprintf("w%d-%d", w, i)
				if _, err := trySend(s, call{path: "/v1/" + endpoints[i%2], cred: creds[w%2], job: job}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()

	buckets := len(creds) * len(endpoints)
	if got, want := len(s.Accepted()), buckets*limit.Burst; got != want {
		t.Errorf("accepted %d, want %d", got, want)
	}
	if got, want := s.Count429(), workers*each-buckets*limit.Burst; got != want {
		t.Errorf("Count429 %d, want %d", got, want)
	}
	if got := len(s.Requests()); got != workers*each {
		t.Errorf("Requests %d, want %d", got, workers*each)
	}
	for _, c := range creds {
		for _, e := range endpoints {
			if got := len(s.AcceptedTimes(c, e)); got != limit.Burst {
				t.Errorf("%s/%s: accepted %d, want %d", c, e, got, limit.Burst)
			}
		}
	}
	for job, n := range s.AcceptedByJob() {
		if n != 1 {
			t.Errorf("job %s accepted %d times", job, n)
		}
	}
}

// With the clock moving under concurrent load, the accepted times satisfy
// the fleet invariant over every window, grants ≤ burst + rate·W, checked by
// package window (no sdk/gcra), whichever way the mock enforces.
func TestConcurrentMovingClockInvariant(t *testing.T) {
	for _, mode := range []Enforcement{EnforceGCRA, EnforceWindow} {
		t.Run(mode.String(), func(t *testing.T) {
			limit := gcra.Limit{Rate: 100, Burst: 5}
			s, c := start(t, Config{Limit: limit, Enforce: mode})
			var wg sync.WaitGroup
			for w := range 50 {
				wg.Go(func() {
					for i := range 10 {
						if _, err := trySend(s, call{cred: "cred", job: fmt.Sprintf("w%d-%d", w, i)}); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Go(func() {
				for range 200 {
					c.Advance(3 * time.Millisecond)
				}
			})
			wg.Wait()

			ts := s.AcceptedTimes("cred", "availability")
			if len(ts) < limit.Burst {
				t.Fatalf("accepted %d, want at least the burst %d", len(ts), limit.Burst)
			}
			if err := s.CheckWindows(); err != nil {
				t.Fatal(err)
			}
			// 500 requests against 5 + 100/s: the fleet sent too much, and
			// the vendor refused the excess.
			if _, broken := s.FullestWindowSent("cred", "availability"); !broken {
				t.Error("FullestWindowSent: 500 requests in 0.6s fit a limit of 5 + 100/s?")
			}
			if s.Count429() == 0 {
				t.Error("no 429 for 500 requests in 0.6s")
			}
		})
	}
}
