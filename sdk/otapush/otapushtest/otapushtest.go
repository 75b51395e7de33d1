// Package otapushtest is a vendor for the tests of code that pushes
// through otapush.Client: an HTTP server on the loopback (net/http/httptest)
// that answers each request as the test scripts, and records what it
// received. A test that checks what a vendor's answer does (a refusal, a
// throttle, a failure) sends it through the real client to this vendor,
// so that the client reads the status, headers and body as it reads a
// vendor's, rather than through a stand-in's errors.
//
//	vendor := otapushtest.NewVendor(t, func(r otapushtest.Request) otapushtest.Answer {
//		return otapushtest.Answer{Status: http.StatusBadRequest, Body: "no such room"}
//	})
//	client := otapushtest.NewClient(t, lim, clock.Now, clock.Sleep)
//	// push to vendor.URL through client
package otapushtest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// Request is a request the vendor received.
type Request struct {
	Path   string // the URL's, from the vendor's
	Body   string
	JobID  string // its X-Job-Id, the vendor's idempotency key
	Header http.Header
}

// Answer is what the vendor answers a request: Status (0: 200), with
// Header and Body.
type Answer struct {
	Status int
	Header http.Header
	Body   string
}

// Vendor is a vendor on the loopback; push to its URL.
type Vendor struct {
	URL    string
	mu     sync.Mutex
	answer func(Request) Answer
	got    []Request
}

// NewVendor starts a vendor that answers each request with answer (nil:
// 200 to every one), and stops it when the test ends. Answers are given
// one at a time, under the lock Sync takes.
func NewVendor(t testing.TB, answer func(Request) Answer) *Vendor {
	t.Helper()
	v := &Vendor{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(srv.Close)
	v.URL = srv.URL
	return v
}

func (v *Vendor) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Path: r.URL.Path, Body: string(body), JobID: r.Header.Get("X-Job-Id"), Header: r.Header.Clone()}
	v.mu.Lock()
	v.got = append(v.got, req)
	a := Answer{}
	if v.answer != nil {
		a = v.answer(req)
	}
	v.mu.Unlock()
	for k, vals := range a.Header {
		w.Header()[k] = vals
	}
	w.WriteHeader(max(a.Status, http.StatusOK))
	_, _ = io.WriteString(w, a.Body)
}

// Received is every request the vendor received so far, in order.
func (v *Vendor) Received() []Request {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.got)
}

// Bodies is the body of every request the vendor received so far.
func (v *Vendor) Bodies() []string {
	var bodies []string
	for _, r := range v.Received() {
		bodies = append(bodies, r.Body)
	}
	return bodies
}

// Sync runs f under the lock the answers are given under: a test reads
// there what its answer function recorded.
func (v *Vendor) Sync(f func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f()
}

// NewClient is an otapush.Client on lim with otapush.DefaultPolicy, on a
// test's clock (now, and sleep, which moves it), its backoff's jitter 1 ms
// and its log discarded; opts come after those.
func NewClient(t testing.TB, lim otapush.Limiter, now func() time.Time, sleep func(ctx context.Context, d time.Duration) error, opts ...otapush.Option) *otapush.Client {
	t.Helper()
	opts = append([]otapush.Option{otapush.WithClock(now), otapush.WithSleep(sleep),
		otapush.WithJitter(func(time.Duration) time.Duration { return time.Millisecond }),
		otapush.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	c, err := otapush.New(nil, lim, otapush.DefaultPolicy, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
