package mockota

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/test/otaformat"
)

// maxBody bounds what one request may send; ARI updates are small, and an
// unbounded read would let a runaway test exhaust memory.
const maxBody = 1 << 20

// Server is a running mock OTA. Its methods are safe for concurrent use.
type Server struct {
	cfg    Config
	creds  map[string]bool
	url    string
	srv    *http.Server
	cancel context.CancelFunc

	mu       sync.Mutex
	buckets  map[bucketKey]tats
	windows  map[bucketKey]*window.Log
	failures map[string][]int
	matching []*matchFailure
	log      []Request
	// hiddenWindow is the limit SetHiddenWindow set (nil: none), and
	// hiddenLogs its arrivals per bucket.
	hiddenWindow *window.Limit
	hiddenLogs   map[bucketKey]*window.Log
	// running counts the requests of each bucket in their handler, and
	// peak the most at once (concurrent.go).
	running, peak map[bucketKey]int
	// gathering is closed, by bucket, when Config.Gather requests first
	// run at once, and gathered says they have (concurrent.go).
	gathering map[bucketKey]chan struct{}
	gathered  map[bucketKey]bool
	// held is what a Wire vendor holds (holding.go).
	held map[heldKey]map[string]any
}

// Start listens on 127.0.0.1 (never all interfaces: a mock that grants
// anything must not be reachable from the network) and serves until Close.
func Start(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, err
	}
	// Every request context derives from ctx, so Close also ends handlers
	// waiting out Config.Latency.
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:       cfg,
		creds:     make(map[string]bool, len(cfg.Credentials)),
		url:       "http://" + ln.Addr().String(),
		cancel:    cancel,
		buckets:   make(map[bucketKey]tats),
		windows:   make(map[bucketKey]*window.Log),
		failures:  make(map[string][]int),
		running:   make(map[bucketKey]int),
		peak:      make(map[bucketKey]int),
		gathering: make(map[bucketKey]chan struct{}),
		gathered:  make(map[bucketKey]bool),
	}
	for _, c := range cfg.Credentials {
		s.creds[c] = true
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the base URL, such as http://127.0.0.1:40123, with no trailing
// slash.
func (s *Server) URL() string { return s.url }

// Close stops the server at once, dropping open connections. The recording
// stays readable.
func (s *Server) Close() {
	_ = s.srv.Close()
	s.cancel()
}

// ServeHTTP records every request, the malformed ones too, and decides it
// under one lock with the clock read inside it, so that arrival order,
// arrival times and the limiter's order are the same sequence.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, AdminPrefix) {
		s.admin(w, r)
		return
	}
	rec := Request{JobID: r.Header.Get("X-Job-Id")}
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	rec.Body = body
	var wire *wireRequest
	var status int
	var msg string
	if s.cfg.Wire != nil {
		wire = s.checkWire(r, &rec, body, readErr)
		status, msg = wire.status, wire.msg
	} else {
		status, msg = s.check(r, &rec, body, readErr)
	}

	var v verdict
	limited := false
	s.mu.Lock()
	// The decision and the recording use one reading, in wall-clock
	// microseconds without the monotonic clock: Time.Sub prefers monotonic
	// readings, and a wall clock slewed against them made the recorded
	// arrivals disagree with what was decided (62 in a window whose bound
	// was 61.97 on a loaded machine).
	rec.At = time.UnixMicro(s.cfg.Now().UnixMicro())
	over := false
	var gathering <-chan struct{}
	if status == 0 {
		k := bucketKey{rec.Credential, rec.Endpoint}
		over, gathering = s.enter(k)
		defer s.leave(k)
	}
	if status == 0 && over {
		status, msg, rec.Metered = http.StatusTooManyRequests, "too many concurrent requests", true
	} else if status == 0 {
		limited, rec.Metered = true, true
		v = s.take(bucketKey{rec.Credential, rec.Endpoint}, rec.At.UnixMicro())
		switch {
		case !v.allowed:
			status, msg = http.StatusTooManyRequests, "rate limit exceeded"
		default:
			if status = s.injected(rec); status != 0 {
				msg = "injected failure"
			} else {
				status = http.StatusOK
				if wire != nil && wire.refusal != nil {
					// Refused in the body: charged, answered, not applied.
					status, rec.Refused = wire.refusal.Status, true
				}
			}
		}
	}
	rec.Status = status
	s.log = append(s.log, rec)
	// The copy changes and is read in arrival order, under the lock that
	// orders the requests.
	var readAnswer []byte
	switch {
	case wire == nil || !accepted(status) || rec.Refused:
	case wire.read != nil:
		q := wire.read
		readAnswer = otaformat.AnswerExpediaPARR(nil, q.From, q.To, s.holdingOf(q.Hotel, q.From, q.To))
	default:
		s.hold(wire.push)
	}
	s.mu.Unlock()

	s.gather(r.Context(), gathering)
	if d := s.cfg.Latency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			// Abort rather than return: a handler that returns unanswered
			// gets an implicit 200, and the client must hear nothing.
			t.Stop()
			panic(http.ErrAbortHandler)
		}
	}

	h := w.Header()
	h.Set("Content-Type", "application/json")
	if limited {
		s.setRateHeaders(h, v)
	}
	if s.cfg.MaxConcurrent > 0 && s.cfg.PublishConcurrency {
		h.Set("RateLimit-Policy", `"concurrency";q=`+strconv.Itoa(s.cfg.MaxConcurrent)+`;qu="concurrent-requests"`)
	}
	if over {
		h.Set("Retry-After", "1")
	}
	if limited && !v.allowed && !s.cfg.OmitRetryAfter {
		h.Set("Retry-After", retryAfter(rec.At, v.wait, s.cfg.RetryAfterHTTPDate))
	}
	switch status {
	case http.StatusMethodNotAllowed:
		h.Set("Allow", http.MethodPost)
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="mockota"`)
	}
	if wire != nil {
		h.Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		if readAnswer != nil {
			_, _ = w.Write(readAnswer)
			return
		}
		_, _ = w.Write(wire.answer(status, msg))
		return
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(answer{OK: accepted(status), JobID: rec.JobID, Error: msg})
}

type answer struct {
	OK    bool   `json:"ok"`
	JobID string `json:"job_id,omitempty"`
	Error string `json:"error,omitempty"`
}

// check validates a request before it reaches the limiter, filling in what
// it learns, and returns 0 if it is well-formed. Malformed requests are
// refused without charging a token: they never name a bucket reliably, and
// fleetbucket's client never sends them, so charging would only blur what
// the rate tests measure.
func (s *Server) check(r *http.Request, rec *Request, body []byte, readErr error) (int, string) {
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, "method not allowed, want POST"
	}
	ep, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok || ep == "" || strings.Contains(ep, "/") {
		return http.StatusNotFound, "no such endpoint, want /v1/{endpoint}"
	}
	rec.Endpoint = ep
	scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	cred = strings.TrimSpace(cred)
	if !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return http.StatusUnauthorized, "missing bearer credential"
	}
	rec.Credential = cred
	if len(s.creds) > 0 && !s.creds[cred] {
		return http.StatusUnauthorized, "unknown credential"
	}
	if rec.JobID == "" {
		return http.StatusBadRequest, "missing X-Job-Id header"
	}
	if readErr != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](readErr); ok {
			return http.StatusRequestEntityTooLarge, "body too large"
		}
		return http.StatusBadRequest, "unreadable body"
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return http.StatusBadRequest, "body must be a JSON object"
	}
	return 0, ""
}
