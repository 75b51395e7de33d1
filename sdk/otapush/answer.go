package otapush

import (
	"context"
	"net/http"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

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
