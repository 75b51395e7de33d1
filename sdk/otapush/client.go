// How a push behaves (package otapush is introduced in doc.go).
//
// Time bounds: every request runs under a context that ends when the push's
// budget (Policy.MaxElapsed) does, so a vendor that never answers cannot
// hold an attempt past it; New(nil, …) uses an http.Client with a
// DefaultHTTPTimeout timeout, never http.DefaultClient, which has none.
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

	"github.com/fleetbucket/fleetbucket/internal/ctxsleep"
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
	MaxElapsed:        20 * time.Second,
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

// WithSleep replaces the pause between attempts (tests move a fake clock
// with it); it must return ctx's error if ctx ends first.
func WithSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = f }
}

// WithJitter replaces the random draw in [0, max) used for backoff.
func WithJitter(f func(max time.Duration) time.Duration) Option {
	return func(c *Client) { c.jitter = f }
}

// DefaultHTTPTimeout bounds one request of a Client made with a nil
// *http.Client: the 20 s an OTA push may take by SiteMinder's SiteConnect
// rules (vendors are expected to answer in 1–2 s). Each attempt is also
// bounded by what is left of Policy.MaxElapsed, whichever ends first.
const DefaultHTTPTimeout = 20 * time.Second

// maxContendedJitter caps the pause before asking the limiter again after
// its writes all lost races (see acquire).
const maxContendedJitter = 50 * time.Millisecond

// New returns a Client. hc nil means a client with DefaultHTTPTimeout (not
// http.DefaultClient, which waits forever for a vendor that never answers).
func New(hc *http.Client, lim Limiter, p Policy, opts ...Option) (*Client, error) {
	if lim == nil {
		return nil, errors.New("otapush: nil limiter: every push must draw a token")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	c := &Client{http: hc, limiter: lim, policy: p, log: slog.Default(), now: time.Now,
		jitter: func(m time.Duration) time.Duration { return rand.N(m) }, sleep: ctxsleep.Sleep}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// MultiWaiter is the part of *limiter.Limiter that waits for a token of
// several buckets at once, for requests with Also.
type MultiWaiter interface {
	WaitMulti(ctx context.Context, buckets []limiter.Bucket, n int, maxWait time.Duration) (limiter.MultiReservation, error)
}

// Request is one push.
type Request struct {
	Bucket limiter.Bucket
	// Also are further buckets every attempt draws from with Bucket, in one
	// transaction (extra windows, a property's share). A 429 penalizes
	// Bucket only: it is what the vendor meters.
	Also   []limiter.Bucket
	URL    string
	JobID  string // sent as X-Job-Id: the vendor's idempotency key
	Body   []byte // JSON
	Header http.Header
	// Reserved says the caller already holds a token (a reservation whose
	// slot has come) for the first attempt; later attempts draw their own.
	Reserved bool
	// Slot is the time the held token was booked for (with Reserved): the
	// vendor meters the push when it arrives, up to the claim, render and
	// request latency after it.
	Slot time.Time
	// Stamp is the held token's grant on an adaptive bucket (with
	// Reserved; nil if unknown): a throttle on the first attempt tells the
	// limiter which rate it was granted at.
	Stamp *limiter.Stamp
	// Siblings are the other shards of a sharded bucket (Bucket is the
	// shard the slot came from): the vendor meters them as one, so a 429
	// or a low remaining count empties them all.
	Siblings []limiter.Bucket
	// Signals, if set, say how this vendor throttles; otherwise the
	// client's WithSignals lookup, or DefaultSignals.
	Signals *Signals
	// Reserve is the part of the meter's burst that Bucket leaves to
	// urgent pushes (a normal push on a meter with an urgent_reserve,
	// whose Bucket's burst is the normal share). A throttle or a drain
	// empties the meter's whole burst: the vendor said nothing is left,
	// urgent tokens included.
	Reserve int
	// Horizon, if positive, is the furthest ahead a retry books (a normal
	// push's, whose share must never run ahead of now by more than its
	// burst): a retry whose token lies further sleeps until it is near
	// and asks again, within the push's budget.
	Horizon time.Duration
	// Tokens is what one attempt costs in the bucket (0 counts as 1): on
	// an endpoint metered by items, the items the body carries times
	// their weight. The vendor meters every attempt, so a retry resends,
	// and pays for, the whole body again.
	Tokens int
	// Method is the HTTP method; "" is POST. Header may set the
	// Content-Type (JSON when it does not).
	Method string
	// Judge, if set, reads each answer in the request's message format:
	// a vendor that answers 200 with an error in its body refused the
	// request, whatever the status says. Without it, the status decides.
	Judge Judge
}

// Judge reads a vendor's answer (its status, headers and the start of its
// body) in the request's message format.
type Judge func(status int, header http.Header, body []byte) Judgement

// Judgement is how a message format reads an answer; the zero Judgement
// is an accepted request.
type Judgement struct {
	// Refused: the vendor will not apply the request as sent (Push
	// returns a *PermanentError carrying Status, Reason and Detail).
	Refused bool
	// Throttled: over the vendor's limit; the throttle path, as a 429.
	Throttled bool
	// Transient: the vendor failed; retried with backoff, as a 5xx.
	Transient bool
	// Reason is the vendor's error text (Refused, Transient).
	Reason string
	// RetryAfter is the vendor's wait (Throttled); 0: its Retry-After
	// header, or the policy's default.
	RetryAfter time.Duration
	// Warnings are an accepted request's warnings (Response.Warnings).
	Warnings []string
	// Detail is the format's own reading (for instance the items the
	// vendor named as refused), handed back on PermanentError.Detail.
	Detail any
}

// meter is the bucket as the vendor meters it: Bucket with the urgent
// reserve it leaves out (Reserve) back in its burst.
func (req Request) meter() limiter.Bucket {
	b := req.Bucket
	b.Limit.Burst += req.Reserve
	return b
}

// Response is what a push came to; Push returns it with its error too.
type Response struct {
	Status   int // the last status received (0 if none)
	Attempts int // requests sent
	// Throttled is how many of them the vendor answered with a throttle
	// status (429, or one of the endpoint's Signals.Statuses), or a
	// throttle its Judge read in the body.
	Throttled int
	// Warnings are the vendor's warnings on the accepted request (Judge).
	Warnings []string
}

// Push sends req, retrying within the policy. It returns a *DeferError when
// the job should come back later, a *PermanentError when it never should,
// and ctx's error if ctx ends first.
func (c *Client) Push(ctx context.Context, req Request) (Response, error) {
	start := c.now()
	sig := c.signalsFor(req)
	var resp Response
	for attempt := 1; ; attempt++ {
		// granted is the reservation this attempt is sent on, nil when the
		// caller reserved it (or for several buckets): a throttle answer
		// tells the limiter which rate it was granted at.
		var granted *limiter.Reservation
		if attempt > 1 || !req.Reserved {
			r, err := c.acquire(ctx, req, start)
			if err != nil {
				return resp, err
			}
			granted = r
		}
		a, retryIn, err := c.send(ctx, req, sig, granted, attempt, start)
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
			return resp, &DeferError{After: retryIn, Status: a.status, Cause: err}
		}
		if err := c.sleep(ctx, retryIn); err != nil {
			return resp, err
		}
	}
}

// acquire waits for a token within what is left of the push's budget.
//
// A call that ends in limiter.ErrContended (every write lost a race to other
// workers: the bucket may well have tokens) is made again at once, after a
// jitter of up to one emission interval of the bucket (at most
// maxContendedJitter, at least 1ms) so that the losers do not collide again,
// for as long as the budget and ctx last. It is never turned into a
// deferral for the whole budget, which would starve this worker while the
// winners of the race take every token.
func (c *Client) acquire(ctx context.Context, req Request, start time.Time) (*limiter.Reservation, error) {
	for {
		left := max(c.policy.MaxElapsed-c.now().Sub(start), 0)
		ahead := left
		if req.Horizon > 0 {
			ahead = min(left, req.Horizon)
		}
		r, err := c.wait(ctx, req, ahead)
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, limiter.ErrContended) {
			pause := c.contendedPause(req.Bucket)
			if c.now().Sub(start)+pause >= c.policy.MaxElapsed || pastDeadline(ctx, c.now().Add(pause)) {
				// The budget ran out in the race: come back soon, not after
				// a whole budget; nobody proved the bucket empty.
				return nil, &DeferError{After: pause, Cause: err}
			}
			if err := c.sleep(ctx, pause); err != nil {
				return nil, err
			}
			continue
		}
		wait, denied := limiter.RetryAfter(err)
		switch {
		case denied && req.Horizon > 0:
			// The share is booked past the horizon: booking further
			// ahead would take the urgent reserve. Sleep until the next
			// token is near (Wait's RetryAfter counts from the end of its
			// max wait), plus a jitter so that retries denied together do
			// not all ask at once, and contend for it afresh.
			pause := wait + c.contendedPause(req.Bucket)
			if c.now().Sub(start)+pause >= c.policy.MaxElapsed || pastDeadline(ctx, c.now().Add(pause)) {
				return nil, &DeferError{After: pause, Cause: err}
			}
			if err := c.sleep(ctx, pause); err != nil {
				return nil, err
			}
			continue
		case denied:
			// A real exhaustion: the slot lies beyond the budget. Wait's
			// RetryAfter counts from the end of its max wait.
			return nil, &DeferError{After: wait + left, Cause: err}
		}
		// The store is down or unsure: fail closed, the job waits in the queue.
		return nil, &DeferError{Cause: err}
	}
}

// wait asks the limiter for what one attempt of req costs (Request.Tokens)
// in every bucket of req, at most left ahead, and returns the reservation
// of a single bucket.
func (c *Client) wait(ctx context.Context, req Request, left time.Duration) (*limiter.Reservation, error) {
	n := max(req.Tokens, 1)
	if len(req.Also) == 0 {
		r, err := c.limiter.Wait(ctx, req.Bucket, n, left)
		if err != nil {
			return nil, err
		}
		return &r, nil
	}
	if multi, ok := c.limiter.(MultiWaiter); ok {
		_, err := multi.WaitMulti(ctx, append([]limiter.Bucket{req.Bucket}, req.Also...), n, left)
		return nil, err
	}
	return nil, fmt.Errorf("the limiter (%T) cannot wait for several buckets at once", c.limiter)
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

// contendedPause is the jitter before asking again after contention: a draw
// in [0, min(T, maxContendedJitter)), at least 1ms, where T = 1/rate is the
// bucket's emission interval (a token a T from now is the next one to win).
func (c *Client) contendedPause(b limiter.Bucket) time.Duration {
	ceiling := maxContendedJitter
	if b.Limit.Rate > 0 {
		t := time.Duration(float64(time.Second) / b.Limit.Rate)
		ceiling = min(max(t, time.Millisecond), maxContendedJitter)
	}
	return max(c.jitter(ceiling), time.Millisecond)
}

// answer is what send learnt of one attempt.
type answer struct {
	status    int
	throttled bool
	warnings  []string
}

// maxJudgedBody is how much of an answer a Judge reads: a vendor's XML
// error list runs longer than the summary a status-only answer keeps.
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
	a := answer{status: s, throttled: sig.Throttles(s)}
	j := c.judge(req, s, resp.Status, resp.Header, body)
	a.throttled = a.throttled || j.Throttled
	c.readSignals(ctx, req, sig, resp.Header, a.throttled)
	switch {
	case a.throttled:
		wait := j.RetryAfter
		if wait <= 0 || wait > c.policy.MaxRetryAfter {
			wait = c.retryAfter(req, resp.Header.Get("Retry-After"))
		}
		until := c.now().Add(wait)
		c.throttle(ctx, req, granted, until)
		// The backoff's jitter may add to Retry-After, never undercut it.
		return a, max(c.backoff(attempt), wait), fmt.Errorf("vendor answered %d (throttled), retry after %v", s, wait)
	case j.Transient:
		return a, c.backoff(attempt), fmt.Errorf("vendor answered %d: %s", s, j.Reason)
	case j.Refused:
		return a, 0, &PermanentError{Status: s, Summary: j.Reason, Detail: j.Detail}
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

// retryAfter turns the header into a wait, logging what it had to repair.
func (c *Client) retryAfter(req Request, header string) time.Duration {
	wait, err := ParseRetryAfter(header, c.now())
	switch {
	case err != nil:
		c.log.Warn("429 without a usable Retry-After; using the default", "job_id", req.JobID, "bucket", req.Bucket.Key, "retry_after", header, "default", c.policy.DefaultRetryAfter, "err", err)
		return c.policy.DefaultRetryAfter
	case wait > c.policy.MaxRetryAfter:
		c.log.Warn("Retry-After over the cap; clamped", "job_id", req.JobID, "bucket", req.Bucket.Key, "retry_after", header, "cap", c.policy.MaxRetryAfter)
		return c.policy.MaxRetryAfter
	}
	return wait
}

// readSignals acts on what the answer's headers say. A low count or
// percentage left empties the fleet bucket: someone else (another system,
// a hidden sub-limit) is using the credential, and the next request would
// be throttled (a throttled answer empties it anyway). A published limit
// reaches an adaptive bucket, which lowers its rate to it or climbs to a
// raised one.
func (c *Client) readSignals(ctx context.Context, req Request, sig Signals, h http.Header, throttled bool) {
	r := sig.Read(h)
	if sig.Low(r) && !throttled {
		c.penalize(ctx, req, c.now(), "drain on low remaining failed")
	}
	if a, ok := c.limiter.(Adapter); ok && r.Rate > 0 {
		if err := a.Publish(ctx, req.Bucket, r.Rate); err != nil {
			c.log.Warn("published limit not recorded", "job_id", req.JobID, "bucket", req.Bucket.Key, "rate", r.Rate, "err", err)
		}
	}
}

// throttle empties the request's bucket until `until` for the whole fleet
// and, where the limiter adapts, lowers its rate; sibling shards are
// emptied too.
func (c *Client) throttle(ctx context.Context, req Request, granted *limiter.Reservation, until time.Time) {
	const failure = "throttle not recorded; other workers will learn from their own throttled answers"
	a, ok := c.limiter.(Adapter)
	if !ok {
		c.penalize(ctx, req, until, failure)
		return
	}
	stamp := req.Stamp // the held token's, for the first attempt
	if granted != nil {
		s, _ := granted.Stamp()
		stamp = &s
	}
	if err := a.Throttle(ctx, req.meter(), stamp, until); err != nil {
		c.log.Warn(failure, "job_id", req.JobID, "bucket", req.Bucket.Key, "err", err)
	}
	for _, b := range req.Siblings {
		if err := c.limiter.Penalize(ctx, b, until); err != nil {
			c.log.Warn(failure, "job_id", req.JobID, "bucket", b.Key, "err", err)
		}
	}
}

// penalize empties the request's bucket, and its sibling shards, until.
func (c *Client) penalize(ctx context.Context, req Request, until time.Time, failure string) {
	for _, b := range append([]limiter.Bucket{req.meter()}, req.Siblings...) {
		if err := c.limiter.Penalize(ctx, b, until); err != nil {
			c.log.Warn(failure, "job_id", req.JobID, "bucket", b.Key, "err", err)
		}
	}
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
