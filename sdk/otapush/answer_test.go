package otapush

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// What one answer's draft-11 fields do to the fleet: a concurrency quota
// reaches WithConcurrency, a content-bytes quota is logged once and
// ignored, a 503 of reduced capacity with a lower policy is a throttle
// that publishes the lower rate, and Retry-After takes precedence over t.
func TestAnswerSignalsReachTheFleet(t *testing.T) {
	ok := scripted{status: 200, body: `{"ok":true}`}
	problem := map[string]string{"Content-Type": "application/problem+json"}
	with := func(h map[string]string, more map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name   string
		script []scripted
		// wants
		concurrency []int
		published   []float64
		throttles   int
		sleeps      []time.Duration
		logs        []string // substrings, each logged exactly once
		noLog       []string
	}{
		{name: "concurrent-requests reaches max_in_flight",
			script:      []scripted{{status: 200, header: map[string]string{"RateLimit-Policy": `"conc";q=2;qu="concurrent-requests"`}, body: `{}`}},
			concurrency: []int{2}},
		{name: "a concurrency policy is no request rate",
			script:      []scripted{{status: 200, header: map[string]string{"RateLimit-Policy": `"conc";q=2;qu="concurrent-requests", "req";q=60;w=60`}, body: `{}`}},
			concurrency: []int{2}, published: []float64{1}},
		{name: "content-bytes is logged once and ignored",
			script: []scripted{
				{status: 200, header: map[string]string{"RateLimit-Policy": `"bytes";q=65536;w=1;qu="content-bytes"`}, body: `{}`},
				{status: 200, header: map[string]string{"RateLimit-Policy": `"bytes";q=65536;w=1;qu="content-bytes"`}, body: `{}`}},
			logs: []string{"content-bytes quota"}},
		{name: "503 reduced capacity with a lower policy is a throttle",
			script: []scripted{
				{status: 503, header: with(problem, map[string]string{"RateLimit-Policy": `"default";q=30;w=60`, "Retry-After": "3"}),
					body: `{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","title":"Temporary Reduced Capacity"}`},
				ok},
			published: []float64{0.5}, throttles: 1, sleeps: []time.Duration{3 * time.Second}},
		{name: "a plain 503 is transient, not a throttle",
			script:    []scripted{{status: 503, header: problem, body: `{"type":"about:blank"}`}, ok},
			throttles: 0, sleeps: []time.Duration{250 * time.Millisecond}},
		{name: "Retry-After takes precedence over t",
			script:    []scripted{{status: 429, header: map[string]string{"Retry-After": "4", "RateLimit": `"default";r=0;t=30`}}, ok},
			throttles: 1, sleeps: []time.Duration{4 * time.Second}},
		{name: "t when Retry-After is missing",
			script:    []scripted{{status: 429, header: map[string]string{"RateLimit": `"default";r=0;t=7`}}, ok},
			throttles: 1, sleeps: []time.Duration{7 * time.Second}},
		{name: "t when Retry-After is unusable",
			script:    []scripted{{status: 429, header: map[string]string{"Retry-After": "soon", "RateLimit": `"default";r=0;t=9`}}, ok},
			throttles: 1, sleeps: []time.Duration{9 * time.Second}},
		{name: "neither: the default, logged",
			script:    []scripted{{status: 429}, ok},
			throttles: 1, sleeps: []time.Duration{DefaultPolicy.DefaultRetryAfter}, logs: []string{"without a usable Retry-After or RateLimit t"}},
		{name: "a malformed field is logged once, never fatal",
			script: []scripted{
				{status: 200, header: map[string]string{"RateLimit": `"default";r=abc`, "RateLimit-Policy": `"default";q=10;w=1`}, body: `{}`},
				{status: 200, header: map[string]string{"RateLimit": `"default";r=abc`}, body: `{}`}},
			published: []float64{10}, logs: []string{"malformed rate-limit field ignored"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := vendor(t, tt.script...)
			lim := &adaptLog{}
			var logs bytes.Buffer
			var concurrency []int
			now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			c, err := New(srv.Client(), lim, DefaultPolicy, WithClock(func() time.Time { return now }),
				WithJitter(func(m time.Duration) time.Duration { return m }),
				WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
				WithConcurrency(func(key string, n int) {
					if key != "v#c#rates" {
						t.Errorf("concurrency for %q, want the request's bucket", key)
					}
					concurrency = append(concurrency, n)
				}))
			if err != nil {
				t.Fatal(err)
			}
			var sleeps []time.Duration
			c.sleep = func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }
			for range len(tt.script) - max(len(tt.sleeps), 0) {
				_, err := c.Push(context.Background(), Request{Bucket: limiter.Bucket{Key: "v#c#rates", Limit: limiter.PerSecond(2, 2)},
					URL: srv.URL, JobID: "job-1", Body: []byte(`{}`), Header: http.Header{"Authorization": {"Bearer secret"}}})
				if err != nil {
					t.Fatalf("Push: %v", err)
				}
			}
			if !equal(concurrency, tt.concurrency) || !equal(lim.published, tt.published) || len(lim.throttles) != tt.throttles || !equal(sleeps, tt.sleeps) {
				t.Fatalf("concurrency %v, published %v, %d throttles, sleeps %v; want %v, %v, %d, %v",
					concurrency, lim.published, len(lim.throttles), sleeps, tt.concurrency, tt.published, tt.throttles, tt.sleeps)
			}
			for _, s := range tt.logs {
				if n := strings.Count(logs.String(), s); n != 1 {
					t.Errorf("%q logged %d times, want once:\n%s", s, n, logs.String())
				}
			}
		})
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A vendor's pk is checked against the buckets, and a mismatch logged once
// per pair, never per request: two buckets charged to one partition, and
// one bucket charged to two.
func TestPartitionMismatchLoggedOnce(t *testing.T) {
	pk := func(p string) scripted {
		return scripted{status: 200, header: map[string]string{"RateLimit": `"default";r=5;pk=:` + p + `:`}, body: `{}`}
	}
	// base64 of "acct-1" and "acct-2"
	a1, a2 := "YWNjdC0x", "YWNjdC0y"
	srv, _ := vendor(t, pk(a1), pk(a1), pk(a1), pk(a1), pk(a2), pk(a2), pk(a1))
	var logs bytes.Buffer
	c, err := New(srv.Client(), &bucketLog{}, DefaultPolicy, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"v#c1#rates", "v#c1#rates", limiter.ShardKey("v#c1#rates", 1), "v#c2#rates", "v#c2#rates", "v#c2#rates", "v#c2#rates"} {
		if _, err := c.Push(context.Background(), Request{Bucket: limiter.Bucket{Key: key, Limit: limiter.PerSecond(2, 2)}, URL: srv.URL, JobID: "job-1",
			Body: []byte(`{}`), Header: http.Header{"Authorization": {"Bearer secret"}}}); err != nil {
			t.Fatal(err)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "two buckets to one quota partition"); n != 1 || !strings.Contains(out, "other_bucket=v#c1#rates") {
		t.Errorf("shared partition logged %d times, want once naming v#c1#rates:\n%s", n, out)
	}
	if n := strings.Count(out, "one bucket to several quota partitions"); n != 1 || !strings.Contains(out, "bucket=v#c2#rates") {
		t.Errorf("split bucket logged %d times, want once for v#c2#rates:\n%s", n, out)
	}
}
