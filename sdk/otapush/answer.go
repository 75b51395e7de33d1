package otapush

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/internal/unavailable"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// throttleWait is how long a throttled request waits: Retry-After where
// the vendor sent a usable one, which takes precedence over the RateLimit
// item's effective window t (draft-11 §7), else t of an item with nothing
// left, else the policy's default; at most Policy.MaxRetryAfter. What it
// had to repair is logged.
func (c *Client) throttleWait(req Request, h http.Header, r Reading) time.Duration {
	wait, ok := Pause(h, r, c.now())
	switch {
	case !ok:
		c.log.Warn("throttled without a usable Retry-After or RateLimit t; using the default", "job_id", req.JobID, "bucket", req.Bucket.Key,
			"retry_after", h.Get("Retry-After"), "default", c.policy.DefaultRetryAfter)
		return c.policy.DefaultRetryAfter
	case wait > c.policy.MaxRetryAfter:
		c.log.Warn("Retry-After over the cap; clamped", "job_id", req.JobID, "bucket", req.Bucket.Key, "retry_after", h.Get("Retry-After"), "cap", c.policy.MaxRetryAfter)
		return c.policy.MaxRetryAfter
	}
	return wait
}

// interval is l's emission interval, the time one token takes to come
// back; zero for a limit with no rate.
func interval(l limiter.Limit) time.Duration {
	if !(l.Rate > 0) {
		return 0
	}
	return time.Duration(l.Interval()) * time.Microsecond
}

// readSignals acts on what the answer's headers said (r). A low count or
// percentage left empties the fleet bucket: someone else (another system,
// a hidden sub-limit) is using the credential, and the next request would
// be throttled (a throttled answer empties it anyway). A published limit
// reaches an adaptive bucket, which lowers its rate to it or climbs to a
// raised one. The draft-11 fields beyond a request rate: a concurrency
// quota goes to WithConcurrency's receiver; a content-bytes quota is
// logged and ignored, since no endpoint meters bytes (cost is requests or
// items); a partition key is checked against the buckets (notePartition).
// Malformed fields were left out of r; each is logged once per bucket.
func (c *Client) readSignals(ctx context.Context, req Request, sig Signals, r Reading, throttled bool) {
	bucket := bucketOf(req.Bucket.Key)
	for _, line := range r.Ignored {
		if c.notes.first(bucket, "ignored", line) {
			c.log.Warn("malformed rate-limit field ignored (logged once per bucket)", "bucket", bucket, "field", line)
		}
	}
	if sig.Low(r) && !throttled {
		c.penalize(ctx, req, c.now(), time.Time{}, "drain on low remaining failed")
	}
	if a, ok := c.limiter.(Adapter); ok && r.Rate > 0 {
		if err := a.Publish(ctx, req.Bucket, r.Rate); err != nil {
			c.log.Warn("published limit not recorded", "job_id", req.JobID, "bucket", req.Bucket.Key, "rate", r.Rate, "err", err)
		}
	}
	if r.Concurrency > 0 && c.concurrency != nil {
		c.concurrency(req.Bucket.Key, r.Concurrency)
	}
	if r.BytesRate > 0 && c.notes.first(bucket, "bytes", "") {
		c.log.Info("the vendor publishes a content-bytes quota; this endpoint meters requests or items, so it is ignored (logged once per bucket)",
			"bucket", bucket, "bytes_per_second", r.BytesRate)
	}
	if r.PartitionKey != nil {
		c.notePartition(bucket, string(r.PartitionKey))
	}
}

// notePartition logs, once per pair, a vendor whose quota partitions (pk)
// do not match the config's buckets: one partition charged by two buckets
// (the vendor meters them as one: give their endpoints one meter, or the
// fleet sends twice what the vendor allows), or one bucket charged to two
// partitions (the vendor meters finer than the config: the bucket is
// stricter than it needs to be).
func (c *Client) notePartition(bucket, pk string) {
	other, partitions := c.notes.partition(bucket, pk)
	if other != "" && c.notes.first(other+"|"+bucket, "pk-shared", pk) {
		c.log.Warn("the vendor charges two buckets to one quota partition (pk): they share a limit at the vendor; give their endpoints one meter",
			"bucket", bucket, "other_bucket", other, "pk", pk)
	}
	if len(partitions) > 1 && c.notes.first(bucket, "pk-split", "") {
		c.log.Warn("the vendor charges one bucket to several quota partitions (pk): it meters finer than the config",
			"bucket", bucket, "partitions", partitions)
	}
}

// bucketOf is the bucket a shard's key belongs to: the vendor meters a
// sharded bucket as one.
func bucketOf(key string) string {
	base, _, _ := strings.Cut(key, limiter.ShardSeparator)
	return base
}

// maxNotes bounds what notes remembers: a vendor sending a new malformed
// value on every answer must not grow a process's memory without end
// (past it, nothing more is logged).
const maxNotes = 4096

// notes remembers what was logged once, and the partitions seen.
type notes struct {
	mu         sync.Mutex
	seen       map[string]bool
	byPK       map[string]string   // pk -> the first bucket charged to it
	partitions map[string][]string // bucket -> the pks it was charged to
}

// first reports whether (key, kind, detail) is new, and remembers it.
func (n *notes) first(key, kind, detail string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := key + "\x00" + kind + "\x00" + detail
	if n.seen[k] || len(n.seen) >= maxNotes {
		return false
	}
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	n.seen[k] = true
	return true
}

// partition records that bucket was charged to pk, and returns another
// bucket charged to the same pk ("" if none) and every pk bucket was
// charged to.
func (n *notes) partition(bucket, pk string) (other string, pks []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byPK == nil {
		n.byPK, n.partitions = map[string]string{}, map[string][]string{}
	}
	if b, ok := n.byPK[pk]; !ok && len(n.byPK) < maxNotes {
		n.byPK[pk] = bucket
	} else if ok && b != bucket {
		other = b
	}
	ps := n.partitions[bucket]
	if !slices.Contains(ps, pk) && len(ps) < 8 {
		ps = append(ps, pk)
		n.partitions[bucket] = ps
	}
	return other, slices.Clone(ps)
}

// throttle empties the request's bucket until `until` for the whole fleet
// and, where the limiter adapts, lowers its rate; sibling shards are
// emptied too. A write the store does not take is asked again until `by`
// (record).
func (c *Client) throttle(ctx context.Context, req Request, granted *limiter.Reservation, until, by time.Time) {
	const failure = "throttle not recorded; other workers will learn from their own throttled answers"
	a, ok := c.limiter.(Adapter)
	if !ok {
		c.penalize(ctx, req, until, by, failure)
		return
	}
	stamp := req.Stamp // the held token's, for the first attempt
	if granted != nil {
		s, _ := granted.Stamp()
		stamp = &s
	}
	stamp = refusedSlot(stamp, req, granted)
	if err := c.record(ctx, by, func() error { return a.Throttle(ctx, req.meter(), stamp, until) }); err != nil {
		c.log.Warn(failure, "job_id", req.JobID, "bucket", req.Bucket.Key, "err", err)
	}
	spacing := int64(1)
	if sp, ok := c.limiter.(interface{ Spacing(limiter.Bucket) int64 }); ok {
		spacing = sp.Spacing(req.meter())
	}
	for i, b := range req.Siblings {
		until := staggered(until, c.now(), b, i+1, len(req.Siblings)+1, spacing)
		penalize := func() error { return c.limiter.Penalize(ctx, b, until) }
		if b.Adaptive == nil && stamp != nil && stamp.Slot > 0 {
			// Shards of one limit are refused together: the same slot may
			// put each on probation (limiter.Throttle).
			penalize = func() error { return a.Throttle(ctx, b, &limiter.Stamp{Slot: stamp.Slot, Tokens: stamp.Tokens}, until) }
		}
		if err := c.record(ctx, by, penalize); err != nil {
			c.log.Warn(failure, "job_id", req.JobID, "bucket", b.Key, "err", err)
		}
	}
}

// staggered is the end of the silence of sibling shard i of k (the
// refused shard is 0) while the refused one is on probation at spacing:
// i/k of the shard's spaced interval later, so that the meter's first
// requests after the silence come one spaced meter interval apart. Shards
// penalized to one end free their first tokens at one instant, and a
// vendor below the meter's rate takes one of them and asks for the next
// silence, whatever the spacing after (adversary seed 643: three shards
// of 1/6 s, a vendor halved to 1/4 s asking a day, one request through
// each 15-minute silence). Never past limiter.MaxPenalty from now.
func staggered(until, now time.Time, b limiter.Bucket, i, k int, spacing int64) time.Time {
	if spacing <= 1 {
		return until
	}
	at := until.Add(time.Duration(int64(i)*spacing*b.Limit.Interval()/int64(k)) * time.Microsecond)
	return minTime(at, now.Add(limiter.MaxPenalty))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// refusedSlot is the stamp a throttle is reported with, carrying the
// refused request's slot: the granted token's, or the held one's
// (Request.Slot), with its tokens. A bucket of fixed rate gets a stamp for the slot alone;
// an adaptive one's missing stamp stays missing (limiter.ThrottleHold
// tells its refusals apart).
func refusedSlot(stamp *limiter.Stamp, req Request, granted *limiter.Reservation) *limiter.Stamp {
	slot, tokens := req.Slot, max(req.Tokens, 1)
	if granted != nil {
		slot, tokens = granted.Slot, granted.Tokens
	}
	switch {
	case slot.IsZero():
		return stamp
	case stamp != nil:
		s := *stamp
		s.Slot, s.Tokens = slot.UnixMicro(), tokens
		return &s
	case req.meter().Adaptive == nil:
		return &limiter.Stamp{Slot: slot.UnixMicro(), Tokens: tokens}
	}
	return nil
}

// penalize empties the request's bucket, and its sibling shards, until;
// a write the store does not take is asked again until `by` (record).
func (c *Client) penalize(ctx context.Context, req Request, until, by time.Time, failure string) {
	for _, b := range append([]limiter.Bucket{req.meter()}, req.Siblings...) {
		if err := c.record(ctx, by, func() error { return c.limiter.Penalize(ctx, b, until) }); err != nil {
			c.log.Warn(failure, "job_id", req.JobID, "bucket", b.Key, "err", err)
		}
	}
}

// record makes write, which records a vendor's silence in the limiter,
// asking again while the store is unavailable (unavailable.Retry), until
// it lands, ctx ends or the next ask would come after by. A silence this
// process heard and did not record is known to no other worker: once the
// store is back they would send inside it at once (adversary seed 74: a
// 429's 15 minutes answered during a 30 s outage, and 169 requests inside
// them after it). The push's budget bounds the wait, so an outage longer
// than it still loses the silence, and the first ask after the store
// returns lands within a pause of it: a worker granted before that
// sends inside the silence. Any other error is returned at once.
func (c *Client) record(ctx context.Context, by time.Time, write func() error) error {
	return unavailable.Retry(ctx, c.sleep, func() bool { return !c.now().Add(unavailable.Pause).After(by) }, write)
}
