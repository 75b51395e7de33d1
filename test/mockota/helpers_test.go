package mockota

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
)

// t0 has a sub-second part so that rounding of HTTP-dates is exercised.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 250_000_000, time.UTC)

// start starts a server whose clock, unless cfg has one, is limitertest's
// from t0: time moves only when a test says so.
func start(t *testing.T, cfg Config) (*Server, *limitertest.Clock) {
	t.Helper()
	c := limitertest.NewClock(t0)
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	return s, c
}

// refillsExactly drives a bucket whose burst was just spent (and one
// request refused): three times, a request a microsecond before the next
// interval T is refused and one at it accepted, then a long idle refills
// the burst and no more. 2·burst + 3 requests are accepted in all.
func refillsExactly(t *testing.T, s *Server, c *limitertest.Clock, T time.Duration, burst int, take func(want int) reply) {
	t.Helper()
	for range 3 {
		c.Advance(T - time.Microsecond)
		take(http.StatusTooManyRequests)
		c.Advance(time.Microsecond)
		take(http.StatusOK)
		take(http.StatusTooManyRequests)
	}
	c.Advance(100 * time.Duration(burst) * T)
	for range burst {
		take(http.StatusOK)
	}
	take(http.StatusTooManyRequests)
	if got, want := len(s.AcceptedTimes("cred", "availability")), 2*burst+3; got != want {
		t.Errorf("accepted %d, want %d", got, want)
	}
}

// reply is what a client saw.
type reply struct {
	status int
	header http.Header
	body   string
}

// call is one request; an empty cred or job omits its header.
type call struct {
	method, path, cred, job, body string
}

func (c call) withDefaults() call {
	if c.method == "" {
		c.method = http.MethodPost
	}
	if c.path == "" {
		c.path = "/v1/availability"
	}
	if c.body == "" {
		c.body = `{"hotel":"h1"}`
	}
	return c
}

func send(t testing.TB, s *Server, c call) reply {
	t.Helper()
	r, err := trySend(s, c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// trySend is send for goroutines other than the test's, which must not call
// t.Fatal.
func trySend(s *Server, c call) (reply, error) {
	c = c.withDefaults()
	req, err := http.NewRequest(c.method, s.URL()+c.path, strings.NewReader(c.body))
	if err != nil {
		return reply{}, err
	}
	if c.cred != "" {
		req.Header.Set("Authorization", "Bearer "+c.cred)
	}
	if c.job != "" {
		req.Header.Set("X-Job-Id", c.job)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", c.method, c.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("read body: %w", err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// post sends a well-formed request for job on endpoint with credential cred.
func post(t testing.TB, s *Server, cred, endpoint, job string) reply {
	t.Helper()
	return send(t, s, call{path: "/v1/" + endpoint, cred: cred, job: job})
}
