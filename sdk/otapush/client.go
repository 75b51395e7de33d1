// How a push behaves (package otapush is introduced in doc.go).
//
// Time bounds: every request runs under a context that ends when the push's
// budget (Policy.MaxElapsed) does, so a vendor that never answers cannot
// hold an attempt past it; New(nil, …) uses an http.Client with a
// PushTimeout timeout, never http.DefaultClient, which has none.
// A vendor's Retry-After is clamped to Policy.MaxRetryAfter however large
// it is, even beyond what a time.Duration holds.
//
// Contention is not exhaustion: when the limiter's writes all lose races to
// other workers (limiter.ErrContended), the push asks again at once, after a
// small jitter, within its budget; it never defers a job for that.

package otapush

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Limiter is the part of *limiter.Limiter a push needs.
type Limiter interface {
	Wait(ctx context.Context, b limiter.Bucket, n int, maxWait time.Duration) (limiter.Reservation, error)
	Penalize(ctx context.Context, b limiter.Bucket, until time.Time) error
}

// Adapter is the part of *limiter.Limiter that lets a vendor's signals
// move an adaptive bucket's rate. A Limiter without it is only penalized.
type Adapter interface {
	Throttle(ctx context.Context, b limiter.Bucket, granted *limiter.Stamp, until time.Time) error
	Publish(ctx context.Context, b limiter.Bucket, rate float64) error
}

// Policy bounds the retries of one push.
type Policy struct {
	// MaxAttempts is the most requests one push sends (≥ 1).
	MaxAttempts int
	// MaxElapsed bounds the time one push may take, waits included (> 0).
	MaxElapsed time.Duration
	// BaseBackoff and MaxBackoff shape the exponential backoff with full
	// jitter between attempts (> 0, Base ≤ Max).
	BaseBackoff, MaxBackoff time.Duration
	// DefaultRetryAfter applies to a 429 with no or an unusable Retry-After.
	DefaultRetryAfter time.Duration
	// MaxRetryAfter caps a vendor's Retry-After; a larger value is clamped
	// and logged.
	MaxRetryAfter time.Duration
	// LowRemaining: when the vendor reports fewer requests left than this,
	// the fleet bucket is drained. 0 turns it off. It applies to requests
	// read with DefaultSignals; an endpoint's own Signals carry their own.
	LowRemaining int
}

// DefaultPolicy suits a Lambda with a timeout of a minute or more.
var DefaultPolicy = Policy{
	MaxAttempts:       4,
	MaxElapsed:        PushTimeout,
	BaseBackoff:       250 * time.Millisecond,
	MaxBackoff:        5 * time.Second,
	DefaultRetryAfter: 2 * time.Second,
	MaxRetryAfter:     15 * time.Minute,
	LowRemaining:      1,
}

// Validate names the first field that is out of range.
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < 1:
		return fmt.Errorf("push policy: MaxAttempts is %d, want ≥ 1", p.MaxAttempts)
	case p.MaxElapsed <= 0:
		return fmt.Errorf("push policy: MaxElapsed is %v, want > 0", p.MaxElapsed)
	case p.BaseBackoff <= 0 || p.MaxBackoff < p.BaseBackoff:
		return fmt.Errorf("push policy: backoff %v..%v, want 0 < BaseBackoff ≤ MaxBackoff", p.BaseBackoff, p.MaxBackoff)
	case p.DefaultRetryAfter <= 0:
		return fmt.Errorf("push policy: DefaultRetryAfter is %v, want > 0", p.DefaultRetryAfter)
	case p.MaxRetryAfter < p.DefaultRetryAfter:
		return fmt.Errorf("push policy: MaxRetryAfter %v is below DefaultRetryAfter %v", p.MaxRetryAfter, p.DefaultRetryAfter)
	case p.LowRemaining < 0:
		return fmt.Errorf("push policy: LowRemaining is %d, want ≥ 0", p.LowRemaining)
	}
	return nil
}

// Client pushes requests to OTAs through the fleet bucket.
type Client struct {
	http    *http.Client
	limiter Limiter
	policy  Policy
	log     *slog.Logger
	now     func() time.Time
	jitter  func(max time.Duration) time.Duration
	sleep   func(ctx context.Context, d time.Duration) error
	signals func(bucketKey string) (Signals, bool)
	// concurrency receives the vendor's published concurrency per bucket
	// (WithConcurrency); nil ignores it.
	concurrency func(bucketKey string, n int)
	notes       notes
}

// Option configures a Client.
type Option func(*Client)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithClock replaces time.Now.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithSignals gives the client each bucket's throttle signals (the
// endpoint's "throttle" settings in the connections file): lookup returns
// them for a bucket key, or false for DefaultSignals. A Request's own
// Signals come first.
func WithSignals(lookup func(bucketKey string) (Signals, bool)) Option {
	return func(c *Client) { c.signals = lookup }
}

// WithConcurrency gives the client where a vendor's published
// concurrency goes: a RateLimit-Policy in qu=concurrent-requests calls f
// with the request's bucket key and the quota, on every answer that
// carries one (dispatch.Leases.Publish lowers the bucket's max_in_flight
// to it, never above the configuration).
func WithConcurrency(f func(bucketKey string, n int)) Option {
	return func(c *Client) { c.concurrency = f }
}

// WithSleep replaces the pause between attempts (tests move a fake clock
// with it); it must return ctx's error if ctx ends first.
func WithSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = f }
}

// WithJitter replaces the random draw in [0, max) used for backoff.
func WithJitter(f func(max time.Duration) time.Duration) Option {
	return func(c *Client) { c.jitter = f }
}

// PushTimeout is the time one push may take, its retries included: the
// 20 s an OTA push may take by SiteMinder's SiteConnect rules (vendors are
// expected to answer in 1–2 s). It is DefaultPolicy.MaxElapsed and the
// timeout of the http.Client New makes; the pipeline's connections config
// sets it as "push_timeout" (config.Config.PushTimeout), and every context
// a caller derives for a push must outlast it, or the caller, not the
// push, ends it (docs/design.md, the push's time). An attempt is bounded by
// what is left of Policy.MaxElapsed, so a client timeout of the same
// figure never ends one first.
const PushTimeout = 20 * time.Second

// New returns a Client. hc nil means a client with PushTimeout (not
// http.DefaultClient, which waits forever for a vendor that never answers).
func New(hc *http.Client, lim Limiter, p Policy, opts ...Option) (*Client, error) {
	if lim == nil {
		return nil, errors.New("otapush: nil limiter: every push must draw a token")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: PushTimeout}
	}
	c := &Client{http: hc, limiter: lim, policy: p, log: slog.Default(), now: time.Now,
		jitter: func(m time.Duration) time.Duration { return rand.N(m) }, sleep: ctxsleep.Sleep}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Push sends req, retrying within the policy. It returns a *DeferError when
// the job should come back later, a *PermanentError when it never should,
// and ctx's error if ctx ends first.
func (c *Client) Push(ctx context.Context, req Request) (Response, error) {
	start := c.now()
	sig := c.signalsFor(req)
	var resp Response
	throttled := false // the last answer was a throttle
	for attempt := 1; ; attempt++ {
		// granted is the reservation this attempt is sent on, nil when the
		// caller reserved it (or for several buckets): a throttle answer
		// tells the limiter which rate it was granted at.
		var granted *limiter.Reservation
		if (attempt > 1 || !req.Reserved) && !req.Shadow {
			r, err := c.acquire(ctx, req, start)
			var later *DeferError
			if errors.As(err, &later) && throttled {
				// No token within the budget after a throttle: the bucket
				// the throttle emptied paces the push, not the vendor.
				later.Throttled = true
			}
			if err != nil {
				return resp, err
			}
			granted = r
		}
		var answered func(bool)
		if req.AtVendor != nil {
			answered = req.AtVendor()
		}
		a, retryIn, err := c.send(ctx, req, sig, granted, attempt, start)
		if answered != nil {
			answered(a.throttled)
		}
		throttled = a.throttled
		resp.Status, resp.Attempts = a.status, attempt
		if a.throttled {
			resp.Throttled++
		}
		if err == nil {
			resp.Warnings = a.warnings
			return resp, nil
		}
		var perm *PermanentError
		if errors.As(err, &perm) || ctx.Err() != nil {
			return resp, err
		}
		elapsed := c.now().Sub(start)
		if attempt >= c.policy.MaxAttempts || elapsed+retryIn >= c.policy.MaxElapsed || pastDeadline(ctx, c.now().Add(retryIn)) {
			return resp, &DeferError{After: retryIn, Status: a.status, Throttled: a.throttled, Cause: err}
		}
		if err := c.sleep(ctx, retryIn); err != nil {
			return resp, err
		}
	}
}

// signalsFor is how the vendor of req throttles.
func (c *Client) signalsFor(req Request) Signals {
	if req.Signals != nil {
		return *req.Signals
	}
	if c.signals != nil {
		if s, ok := c.signals(req.Bucket.Key); ok {
			return s
		}
	}
	s := DefaultSignals
	s.LowRemaining = c.policy.LowRemaining
	return s
}

// answer is what send learnt of one attempt.
type answer struct {
	status    int
	throttled bool
	warnings  []string
}

// maxJudgedBody is how much of an answer a Judge reads: a vendor's XML
// error list runs longer than the summary a status-only answer keeps. A
// longer answer reaches the Judge cut here; the message formats judge it by
// what came before the cut (sdk/pipeline/format: Success or the errors come
// first), never by a decode error that would retry it unchanged.
const maxJudgedBody = 64 << 10

// send makes one request, bounded by what is left of the push's budget. On
// failure it returns how long to wait before the next attempt.
func (c *Client) send(ctx context.Context, req Request, sig Signals, granted *limiter.Reservation, attempt int, start time.Time) (answer, time.Duration, error) {
	left := c.policy.MaxElapsed - c.now().Sub(start)
	if left <= 0 {
		return answer{}, 0, fmt.Errorf("no time left of the push's %v budget for attempt %d", c.policy.MaxElapsed, attempt)
	}
	actx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	hreq, err := http.NewRequestWithContext(actx, method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return answer{}, 0, &PermanentError{Summary: "bad request: " + err.Error()}
	}
	for k, vs := range req.Header {
		hreq.Header[k] = vs
	}
	if hreq.Header.Get("Content-Type") == "" {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("X-Job-Id", req.JobID)
	resp, err := c.http.Do(hreq)
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			// The vendor may have applied it: X-Job-Id lets it drop a repeat.
			return answer{}, c.backoff(attempt), fmt.Errorf("no answer within the %v left of the push's budget (attempt %d): %w", left.Round(time.Millisecond), attempt, err)
		}
		return answer{}, c.backoff(attempt), fmt.Errorf("network: %w", err)
	}
	limit := int64(4096)
	if req.Judge != nil {
		limit = maxJudgedBody
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	resp.Body.Close()
	s := resp.StatusCode
	r := sig.ReadAnswer(s, resp.Header, body)
	// A 503 of temporary reduced capacity is a throttle: its lower policy
	// (r.Rate) is published, and the bucket emptied and slowed.
	a := answer{status: s, throttled: sig.Throttles(s) || r.ReducedCapacity}
	j := c.judge(req, s, resp.Status, resp.Header, body)
	a.throttled = a.throttled || j.Throttled
	c.readSignals(ctx, req, sig, r, a.throttled)
	switch {
	case a.throttled:
		wait := j.RetryAfter
		if wait <= 0 || wait > c.policy.MaxRetryAfter {
			wait = c.throttleWait(req, resp.Header, r)
		}
		// A vendor that refuses and says "now" (Retry-After: 0, as some
		// answer a request they can never take) is asked again no sooner
		// than the bucket's next token: a silence of nothing would let the
		// fleet send at once what was just refused.
		wait = max(wait, interval(req.Bucket.Limit))
		until := c.now().Add(wait)
		c.throttle(ctx, req, granted, until, start.Add(c.policy.MaxElapsed))
		// The backoff's jitter may add to Retry-After, never undercut it.
		return a, max(c.backoff(attempt), wait), fmt.Errorf("vendor answered %d (throttled), retry after %v", s, wait)
	case j.Transient:
		return a, c.backoff(attempt), fmt.Errorf("vendor answered %d: %s", s, j.Reason)
	case j.Refused:
		return a, 0, &PermanentError{Status: s, Summary: j.Reason, Detail: j.Detail, Scope: j.Scope}
	}
	a.warnings = j.Warnings
	for _, w := range j.Warnings {
		c.log.Warn("vendor accepted the push with a warning", "job_id", req.JobID, "bucket", req.Bucket.Key, "warning", w)
	}
	return a, 0, nil
}

// judge reads an answer: with the request's Judge, or by its status (2xx
// accepted, 5xx transient, any other refused; throttles are the Signals').
func (c *Client) judge(req Request, status int, statusText string, h http.Header, body []byte) Judgement {
	if req.Judge != nil {
		return req.Judge(status, h, body)
	}
	switch {
	case status >= 200 && status < 300:
		return Judgement{}
	case status >= 500:
		return Judgement{Transient: true}
	}
	return Judgement{Refused: true, Reason: summarize(statusText, body)}
}

// backoff is exponential with full jitter, at least 1ms.
func (c *Client) backoff(attempt int) time.Duration {
	ceiling := c.policy.BaseBackoff << min(attempt-1, 30)
	if ceiling <= 0 || ceiling > c.policy.MaxBackoff {
		ceiling = c.policy.MaxBackoff
	}
	return max(c.jitter(ceiling), time.Millisecond)
}

func summarize(status string, body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.TrimSpace(status + " " + s)
}

func pastDeadline(ctx context.Context, t time.Time) bool {
	d, ok := ctx.Deadline()
	return ok && t.After(d)
}
