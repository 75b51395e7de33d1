package mockota

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// Malformed and unauthenticated requests are refused before the limiter and
// charge no token.
func TestRefusedRequests(t *testing.T) {
	s, _ := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 2}, Credentials: []string{"a", "b"}})
	for _, tc := range []struct {
		name string
		call call
		want int
	}{
		{"no authorization", call{job: "j"}, 401},
		{"unknown credential", call{cred: "zzz", job: "j"}, 401},
		{"missing X-Job-Id", call{cred: "a"}, 400},
		{"invalid JSON", call{cred: "a", job: "j", body: `{"a":`}, 400},
		{"JSON array", call{cred: "a", job: "j", body: `[1,2]`}, 400},
		{"JSON null", call{cred: "a", job: "j", body: `null`}, 400},
		{"trailing data", call{cred: "a", job: "j", body: `{"a":1} {}`}, 400},
		{"blank body", call{cred: "a", job: "j", body: " \n"}, 400},
		{"body too large", call{cred: "a", job: "j", body: `{"x":"` + strings.Repeat("x", maxBody) + `"}`}, 413},
		{"GET", call{method: http.MethodGet, cred: "a", job: "j"}, 405},
		{"wrong version", call{path: "/v2/rates", cred: "a", job: "j"}, 404},
		{"no endpoint", call{path: "/v1/", cred: "a", job: "j"}, 404},
		{"nested path", call{path: "/v1/rates/x", cred: "a", job: "j"}, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(t, s, tc.call)
			wantStatus(t, r, tc.want, tc.name)
			var a answer
			if err := json.Unmarshal([]byte(r.body), &a); err != nil || a.OK || a.Error == "" {
				t.Errorf("body %q, want a JSON error", r.body)
			}
			if v := r.header.Values("X-RateLimit-Remaining"); len(v) > 0 {
				t.Errorf("X-RateLimit-Remaining %q on a request the limiter never saw", v)
			}
		})
	}
	t.Run("wrong scheme", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/rates", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Basic a")
		req.Header.Set("X-Job-Id", "j")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("status %d, WWW-Authenticate %q; want 401 with a challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	})

	// Nothing above was charged: the full burst is still there.
	wantStatus(t, post(t, s, "a", "availability", "ok1"), 200, "first after refusals")
	wantStatus(t, post(t, s, "a", "availability", "ok2"), 200, "second after refusals")
	wantStatus(t, post(t, s, "a", "availability", "over"), 429, "beyond burst")
	if got := len(s.Accepted()); got != 2 {
		t.Errorf("Accepted %d, want 2", got)
	}
}

func TestAnyCredentialWhenNoneConfigured(t *testing.T) {
	s, _ := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 1}})
	wantStatus(t, post(t, s, "whatever", "rates", "j"), 200, "any credential")
	wantStatus(t, send(t, s, call{job: "j"}), 401, "no credential")
}

func TestFailNext(t *testing.T) {
	s, c := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 3}})
	s.FailNext("j1", 503, 2)
	for i, want := range []int{503, 503, 200} {
		r := post(t, s, "a", "rates", "j1")
		wantStatus(t, r, want, "j1")
		if got := r.header.Get("X-RateLimit-Remaining"); got != []string{"2", "1", "0"}[i] {
			t.Errorf("j1 #%d: X-RateLimit-Remaining %q", i, got)
		}
		if v := r.header.Values("Retry-After"); len(v) > 0 {
			t.Errorf("j1 #%d: Retry-After %q on an injected failure", i, v)
		}
	}
	// The two failures were charged: the bucket is empty.
	wantStatus(t, post(t, s, "a", "rates", "j2"), 429, "after injected failures")

	// A 429 consumes no injected failure; the first request let through
	// gets it.
	s.FailNext("j3", 500, 1)
	wantStatus(t, post(t, s, "a", "rates", "j3"), 429, "j3 while empty")
	c.Advance(time.Second)
	wantStatus(t, post(t, s, "a", "rates", "j3"), 500, "j3 let through")
	c.Advance(time.Second)
	wantStatus(t, post(t, s, "a", "rates", "j3"), 200, "j3 retried")

	// Failures queue in order and are per job.
	s.FailNext("j4", 400, 1)
	s.FailNext("j4", 404, 1)
	s.FailNext("j5", 429, 1)
	c.Advance(time.Hour)
	wantStatus(t, post(t, s, "a", "rates", "j4"), 400, "j4 first")
	wantStatus(t, post(t, s, "a", "rates", "j5"), 429, "j5 injected 429")
	wantStatus(t, post(t, s, "a", "rates", "j4"), 404, "j4 second")
	c.Advance(time.Hour)
	wantStatus(t, post(t, s, "a", "rates", "j4"), 200, "j4 third")
	wantStatus(t, post(t, s, "a", "rates", "j5"), 200, "j5 retried")

	want := map[string]int{"j1": 1, "j3": 1, "j4": 1, "j5": 1}
	got := s.AcceptedByJob()
	if len(got) != len(want) {
		t.Errorf("AcceptedByJob %v, want %v", got, want)
	}
	for j, n := range want {
		if got[j] != n {
			t.Errorf("AcceptedByJob[%s] = %d, want %d", j, got[j], n)
		}
	}
	if got := s.Count429(); got != 3 {
		t.Errorf("Count429 %d, want 3 (two limiter, one injected)", got)
	}

	for _, bad := range []struct{ status, times int }{{200, 1}, {302, 1}, {600, 1}, {500, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("FailNext(%d, %d) did not panic", bad.status, bad.times)
				}
			}()
			s.FailNext("x", bad.status, bad.times)
		}()
	}
}

func TestRecording(t *testing.T) {
	s, c := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 1}, Credentials: []string{"a"}})
	body := `{"hotel":"h1","rates":[1,2]}`
	wantStatus(t, send(t, s, call{path: "/v1/rates", cred: "a", job: "j1", body: body}), 200, "accepted")
	c.Advance(time.Millisecond)
	wantStatus(t, send(t, s, call{path: "/v1/rates", cred: "a", job: "j2"}), 429, "limited")
	wantStatus(t, send(t, s, call{path: "/v1/rates", cred: "a"}), 400, "no job")

	r := send(t, s, call{path: "/v1/rates", cred: "a", job: "j9", body: body})
	if r.status != 429 {
		t.Fatalf("status %d", r.status)
	}
	c.Advance(time.Second)
	r = send(t, s, call{path: "/v1/availability", cred: "a", job: `j"3`, body: body})
	wantStatus(t, r, 200, "accepted")
	var a answer
	if err := json.Unmarshal([]byte(r.body), &a); err != nil || !a.OK || a.JobID != `j"3` || a.Error != "" {
		t.Fatalf("body %q, want {\"ok\":true,\"job_id\":\"j\\\"3\"}", r.body)
	}

	all := s.Requests()
	want := []Request{
		{JobID: "j1", Credential: "a", Endpoint: "rates", At: t0, Status: 200, Body: []byte(body)},
		{JobID: "j2", Credential: "a", Endpoint: "rates", At: t0.Add(time.Millisecond), Status: 429},
		{Credential: "a", Endpoint: "rates", At: t0.Add(time.Millisecond), Status: 400},
		{JobID: "j9", Credential: "a", Endpoint: "rates", At: t0.Add(time.Millisecond), Status: 429, Body: []byte(body)},
		{JobID: `j"3`, Credential: "a", Endpoint: "availability", At: t0.Add(time.Second + time.Millisecond), Status: 200, Body: []byte(body)},
	}
	if len(all) != len(want) {
		t.Fatalf("Requests: %d, want %d", len(all), len(want))
	}
	for i, w := range want {
		g := all[i]
		if w.Body == nil {
			w.Body = []byte(`{"hotel":"h1"}`)
		}
		if g.JobID != w.JobID || g.Credential != w.Credential || g.Endpoint != w.Endpoint ||
			!g.At.Equal(w.At) || g.Status != w.Status || !bytes.Equal(g.Body, w.Body) {
			t.Errorf("Requests[%d] = %+v, want %+v", i, g, w)
		}
	}
	acc := s.Accepted()
	if len(acc) != 2 || acc[0].JobID != "j1" || acc[1].JobID != `j"3` {
		t.Fatalf("Accepted %+v", acc)
	}
	// Returned copies are the caller's own.
	acc[0].Body[0] = 'X'
	if s.Accepted()[0].Body[0] != '{' {
		t.Error("modifying an Accepted body changed the recording")
	}
	if ts := s.AcceptedTimes("a", "rates"); len(ts) != 1 || !ts[0].Equal(t0) {
		t.Errorf("AcceptedTimes(a, rates) = %v", ts)
	}
	if ts := s.AcceptedTimes("a", "nope"); len(ts) != 0 {
		t.Errorf("AcceptedTimes(a, nope) = %v", ts)
	}
}

func TestLatency(t *testing.T) {
	t.Run("short", func(t *testing.T) {
		s, _ := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 1}, Latency: time.Millisecond})
		wantStatus(t, post(t, s, "a", "rates", "j"), 200, "with latency")
	})
	// A request the vendor recorded counts even if nobody hears the answer,
	// and Close does not wait out the latency.
	t.Run("closed while waiting", func(t *testing.T) {
		s, _ := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 1}, Latency: time.Hour})
		done := make(chan error, 1)
		go func() {
			_, err := trySend(s, call{cred: "a", job: "j"})
			done <- err
		}()
		for len(s.Requests()) == 0 {
			runtime.Gosched()
		}
		s.Close()
		if err := <-done; err == nil {
			t.Error("request answered although the server closed during its latency")
		}
		if got := s.AcceptedByJob()["j"]; got != 1 {
			t.Errorf("AcceptedByJob[j] = %d, want 1", got)
		}
	})
}

func TestStartRejectsConfig(t *testing.T) {
	ok := gcra.Limit{Rate: 1, Burst: 1}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"zero limit", Config{}},
		{"zero burst", Config{Limit: gcra.Limit{Rate: 1}}},
		{"negative rate", Config{Limit: gcra.Limit{Rate: -1, Burst: 1}}},
		{"NaN rate", Config{Limit: gcra.Limit{Rate: math.NaN(), Burst: 1}}},
		{"bad endpoint limit", Config{Limit: ok, Limits: map[string]gcra.Limit{"rates": {Rate: 1}}}},
		{"empty endpoint", Config{Limit: ok, Limits: map[string]gcra.Limit{"": ok}}},
		{"bad hidden limit", Config{Limit: ok, HiddenLimit: &gcra.Limit{Burst: 1}}},
		{"empty credential", Config{Limit: ok, Credentials: []string{"a", ""}}},
		{"negative latency", Config{Limit: ok, Latency: -time.Second}},
		{"bad port", Config{Limit: ok, Port: 70000}},
		{"unknown enforcement", Config{Limit: ok, Enforce: Enforcement(9)}},
		{"hidden limit with window enforcement", Config{Limit: ok, Enforce: EnforceWindow, HiddenLimit: &ok}},
		{"hidden limit with no enforcement", Config{Limit: ok, Enforce: EnforceNone, HiddenLimit: &ok}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Start(tc.cfg)
			if err == nil {
				s.Close()
				t.Fatal("Start accepted an invalid config")
			}
		})
	}
}

func TestListensOnLoopback(t *testing.T) {
	s, _ := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 1}})
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") || strings.HasSuffix(s.URL(), ":0") {
		t.Fatalf("URL %q, want http://127.0.0.1:<port>", s.URL())
	}
}
