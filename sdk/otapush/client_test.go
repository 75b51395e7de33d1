package otapush

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"120", 2 * time.Minute, false},
		{" 3 ", 3 * time.Second, false},
		{"0", 0, false},
		{"Mon, 30 Nov 2026 12:00:05 GMT", 5 * time.Second, false},
		{"Monday, 30-Nov-26 12:01:00 GMT", time.Minute, false}, // RFC 850, obsolete but allowed
		{"Mon Nov 30 12:00:07 2026", 7 * time.Second, false},   // asctime
		{"Mon, 30 Nov 2026 11:00:00 GMT", 0, false},            // in the past: now
		{"", 0, true},
		{"-5", 0, true},
		{"soon", 0, true},
		{"1.5", 0, true},
		{"+5", 0, true},
		{"5s", 0, true},
		// Too large for a Duration: saturate, so the caller's cap clamps it.
		{"4000000000", 4000000000 * time.Second, false},
		{"9223372036", 9223372036 * time.Second, false}, // the largest that fits
		{"9223372037", math.MaxInt64, false},
		{"99999999999", math.MaxInt64, false},
		{"99999999999999999999", math.MaxInt64, false}, // beyond int64
		{"00000000000000000000000000007", 7 * time.Second, false},
		{"Fri, 31 Dec 9999 23:59:59 GMT", math.MaxInt64, false},
	}
	for _, tt := range tests {
		got, err := ParseRetryAfter(tt.in, now)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestRemainingHeaders(t *testing.T) {
	tests := []struct {
		header, value string
		want          int
		ok            bool
	}{
		{"X-RateLimit-Remaining", "7", 7, true},
		{"X-Rate-Limit-Remaining", "0", 0, true},
		{"RateLimit-Remaining", "3, 50;w=60", 3, true},
		{"X-RateLimit-Remaining", "lots", 0, false},
		{"X-Other", "1", 0, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set(tt.header, tt.value)
		if got, ok := remaining(h); got != tt.want || ok != tt.ok {
			t.Errorf("remaining(%s: %s) = %d, %v; want %d, %v", tt.header, tt.value, got, ok, tt.want, tt.ok)
		}
	}
}

// bucketLog stands in for the limiter: these tests are about the HTTP side.
// It grants every Wait and records what the client asked of the bucket.
type bucketLog struct {
	mu        sync.Mutex
	waits     int
	penalties []time.Time // the penalties written
	waitErr   error
	// penalizeErr, if set, answers the nth Penalize (from 1) in place of
	// writing it.
	penalizeErr func(n int) error
	asks        int // Penalize calls
}

func (b *bucketLog) Wait(_ context.Context, bk limiter.Bucket, n int, _ time.Duration) (limiter.Reservation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waits++
	if b.waitErr != nil {
		return limiter.Reservation{}, b.waitErr
	}
	return limiter.Reservation{Key: bk.Key, Tokens: n}, nil
}

func (b *bucketLog) Penalize(_ context.Context, _ limiter.Bucket, until time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asks++
	if b.penalizeErr != nil {
		if err := b.penalizeErr(b.asks); err != nil {
			return err
		}
	}
	b.penalties = append(b.penalties, until)
	return nil
}

// vendor answers each request with the next scripted response.
type scripted struct {
	status int
	header map[string]string
	body   string
}

func vendor(t *testing.T, script ...scripted) (*httptest.Server, *int) {
	t.Helper()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Job-Id") != "job-1" || r.Header.Get("Authorization") != "Bearer secret" {
			t.Errorf("request lacks its job id or credential: %v", r.Header)
		}
		s := script[min(calls, len(script)-1)]
		calls++
		for k, v := range s.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(s.status)
		_, _ = io.WriteString(w, s.body)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestPush(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ok := scripted{status: 200, body: `{"ok":true}`}
	tests := []struct {
		name      string
		script    []scripted
		reserved  bool
		wantErr   error
		wantCalls int
		wantWaits int
		wantSlept []time.Duration
		penalties []time.Duration // after now
		deferMin  time.Duration
	}{
		{"accepted first time", []scripted{ok}, true, nil, 1, 0, nil, nil, 0},
		{"unreserved draws a token", []scripted{ok}, false, nil, 1, 1, nil, nil, 0},
		{"429 then ok penalizes the fleet", []scripted{{status: 429, header: map[string]string{"Retry-After": "3"}}, ok}, true, nil, 2, 1,
			[]time.Duration{3 * time.Second}, []time.Duration{3 * time.Second}, 0},
		{"429 http-date", []scripted{{status: 429, header: map[string]string{"Retry-After": "Mon, 30 Nov 2026 12:00:04 GMT"}}, ok}, true, nil, 2, 1,
			[]time.Duration{4 * time.Second}, []time.Duration{4 * time.Second}, 0},
		// Adversary seed 84: a vendor answered a request it could never
		// take 429 with Retry-After 0, and the fleet asked again at once.
		{"429 Retry-After 0 waits the bucket's interval (5/s: 200 ms)", []scripted{{status: 429, header: map[string]string{"Retry-After": "0"}}, ok}, true, nil, 2, 1,
			[]time.Duration{200 * time.Millisecond}, []time.Duration{200 * time.Millisecond}, 0},
		{"429 garbage Retry-After uses the default", []scripted{{status: 429, header: map[string]string{"Retry-After": "later"}}, ok}, true, nil, 2, 1,
			[]time.Duration{2 * time.Second}, []time.Duration{2 * time.Second}, 0},
		{"429 negative Retry-After uses the default", []scripted{{status: 429, header: map[string]string{"Retry-After": "-7"}}, ok}, true, nil, 2, 1,
			[]time.Duration{2 * time.Second}, []time.Duration{2 * time.Second}, 0},
		{"429 huge Retry-After is capped and deferred", []scripted{{status: 429, header: map[string]string{"Retry-After": "86400"}}}, true, ErrDefer, 1, 0,
			nil, []time.Duration{15 * time.Minute}, 15 * time.Minute},
		{"429 Retry-After beyond a Duration is capped, not defaulted", []scripted{{status: 429, header: map[string]string{"Retry-After": "99999999999"}}}, true, ErrDefer, 1, 0,
			nil, []time.Duration{15 * time.Minute}, 15 * time.Minute},
		{"429 Retry-After beyond int64 is capped", []scripted{{status: 429, header: map[string]string{"Retry-After": "99999999999999999999"}}}, true, ErrDefer, 1, 0,
			nil, []time.Duration{15 * time.Minute}, 15 * time.Minute},
		{"429 Retry-After of 4e9 s is capped", []scripted{{status: 429, header: map[string]string{"Retry-After": "4000000000"}}}, true, ErrDefer, 1, 0,
			nil, []time.Duration{15 * time.Minute}, 15 * time.Minute},
		{"429 past the budget defers", []scripted{{status: 429, header: map[string]string{"Retry-After": "30"}}}, true, ErrDefer, 1, 0,
			nil, []time.Duration{30 * time.Second}, 30 * time.Second},
		{"5xx retries then succeeds", []scripted{{status: 503}, {status: 500}, ok}, true, nil, 3, 2,
			[]time.Duration{100 * time.Millisecond, 100 * time.Millisecond}, nil, 0},
		{"5xx exhausts attempts and defers", []scripted{{status: 502}}, true, ErrDefer, 4, 3,
			[]time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}, nil, 0},
		{"400 is permanent", []scripted{{status: 400, body: `{"error":"room type R9 unknown"}`}}, true, ErrPermanent, 1, 0, nil, nil, 0},
		{"404 is permanent", []scripted{{status: 404}}, true, ErrPermanent, 1, 0, nil, nil, 0},
		{"low remaining drains the bucket", []scripted{{status: 200, header: map[string]string{"X-RateLimit-Remaining": "0"}}}, true, nil, 1, 0,
			nil, []time.Duration{0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := vendor(t, tt.script...)
			bl := &bucketLog{}
			var slept []time.Duration
			c, err := New(srv.Client(), bl, DefaultPolicy, WithClock(func() time.Time { return now }),
				WithJitter(func(time.Duration) time.Duration { return 100 * time.Millisecond }),
				WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			c.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
			_, err = c.Push(context.Background(), Request{
				Bucket: limiter.Bucket{Key: "booking_com#c1#availability", Limit: limiter.PerSecond(5, 5)},
				URL:    srv.URL + "/v1/availability", JobID: "job-1", Body: []byte(`{}`),
				Header: http.Header{"Authorization": {"Bearer secret"}}, Reserved: tt.reserved,
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Push = %v, want %v", err, tt.wantErr)
			}
			if *calls != tt.wantCalls || bl.waits != tt.wantWaits {
				t.Errorf("%d requests and %d token waits, want %d and %d", *calls, bl.waits, tt.wantCalls, tt.wantWaits)
			}
			if !slices.Equal(slept, tt.wantSlept) {
				t.Errorf("slept %v, want %v", slept, tt.wantSlept)
			}
			var pen []time.Duration
			for _, p := range bl.penalties {
				pen = append(pen, p.Sub(now))
			}
			if !slices.Equal(pen, tt.penalties) {
				t.Errorf("penalties at +%v, want +%v", pen, tt.penalties)
			}
			var de *DeferError
			if errors.As(err, &de) && de.After < tt.deferMin {
				t.Errorf("deferred for %v, want ≥ %v", de.After, tt.deferMin)
			}
			var pe *PermanentError
			if errors.As(err, &pe) && (pe.Status != tt.script[0].status || !strings.Contains(pe.Error(), tt.script[0].body)) {
				t.Errorf("permanent error %q lacks the status or body", pe)
			}
		})
	}
}

func TestPushFailsClosedWhenTheStoreIsDown(t *testing.T) {
	srv, calls := vendor(t, scripted{status: 200})
	bl := &bucketLog{waitErr: errors.New("store unreachable")}
	c, err := New(srv.Client(), bl, DefaultPolicy)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Push(context.Background(), Request{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(1, 1)}, URL: srv.URL, JobID: "job-1"})
	if !errors.Is(err, ErrDefer) || *calls != 0 {
		t.Fatalf("Push = %v with %d requests sent; want a deferral and nothing sent", err, *calls)
	}
}

func TestNetworkErrorDefers(t *testing.T) {
	srv, _ := vendor(t, scripted{status: 200})
	url := srv.URL
	srv.Close()
	c, err := New(nil, &bucketLog{}, DefaultPolicy, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	c.sleep = func(context.Context, time.Duration) error { return nil }
	_, err = c.Push(context.Background(), Request{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(1, 1)}, URL: url, JobID: "job-1", Reserved: true})
	if !errors.Is(err, ErrDefer) {
		t.Fatalf("Push = %v, want a deferral", err)
	}
}

func TestPolicyValidate(t *testing.T) {
	bad := []func(*Policy){
		func(p *Policy) { p.MaxAttempts = 0 },
		func(p *Policy) { p.MaxElapsed = 0 },
		func(p *Policy) { p.BaseBackoff = 0 },
		func(p *Policy) { p.MaxBackoff = p.BaseBackoff / 2 },
		func(p *Policy) { p.DefaultRetryAfter = -1 },
		func(p *Policy) { p.MaxRetryAfter = time.Second },
		func(p *Policy) { p.LowRemaining = -1 },
	}
	for i, mutate := range bad {
		p := DefaultPolicy
		mutate(&p)
		if _, err := New(nil, &bucketLog{}, p); err == nil {
			t.Errorf("bad policy %d accepted: %+v", i, p)
		}
	}
}

// Adversary seed 63: a push throttled by a vendor's in-flight cap that
// then found no token within its budget came back as a plain failure, and
// a slow vendor's lane job counted such pushes with its timeouts until it
// gave up. A push that fails for want of a token after a throttle, or on a
// throttle, says it was throttled; one that fails on a 5xx, or on a token
// before any throttle, does not.
func TestDeferSaysWhetherThePushEndedThrottled(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	exhausted := &limiter.ExhaustedError{Key: "booking_com#c1#availability", N: 1, RetryAfter: time.Second}
	for _, tt := range []struct {
		name      string
		script    []scripted
		reserved  bool
		waitErr   error
		throttled bool
	}{
		{"a 429, then no token within the budget", []scripted{{status: 429, header: map[string]string{"Retry-After": "1"}}}, true, exhausted, true},
		{"a 429 past the budget", []scripted{{status: 429, header: map[string]string{"Retry-After": "30"}}}, true, nil, true},
		{"5xx to the last attempt", []scripted{{status: 503}}, true, nil, false},
		{"no token before any request", []scripted{{status: 200}}, false, exhausted, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := vendor(t, tt.script...)
			bl := &bucketLog{waitErr: tt.waitErr}
			c, err := New(srv.Client(), bl, DefaultPolicy, WithClock(func() time.Time { return now }),
				WithJitter(func(time.Duration) time.Duration { return 100 * time.Millisecond }), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			c.sleep = func(context.Context, time.Duration) error { return nil }
			_, err = c.Push(context.Background(), Request{
				Bucket: limiter.Bucket{Key: "booking_com#c1#availability", Limit: limiter.PerSecond(5, 5)},
				URL:    srv.URL, JobID: "job-1", Body: []byte(`{}`), Header: http.Header{"Authorization": {"Bearer secret"}}, Reserved: tt.reserved,
			})
			var de *DeferError
			if !errors.As(err, &de) || de.Throttled != tt.throttled {
				t.Fatalf("Push = %#v, want a DeferError with Throttled %v", err, tt.throttled)
			}
		})
	}
}
