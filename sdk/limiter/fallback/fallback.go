// How the shares work (package fallback is introduced in doc.go).
//
// With N processes at most (the function's maximum concurrency), each one
// paces a bucket of rate r and burst b with a local token bucket
// (golang.org/x/time/rate) of rate r/N and burst max(1, ⌊b/N⌋). Summed over
// the fleet, the rate is r again. The burst is b again when N ≤ b; when
// N > b each process still needs one token to push at all, so the fleet's
// burst may reach N: an outage with more live processes than the limit's
// burst can open with up to N requests at once, then settles to r.
//
// The two ends of an outage need care, because the shared bucket and the
// local shares do not see each other's grants:
//
//   - Start: the shared bucket may have granted its whole burst just
//     before, and N local bursts on top of it would exceed the limit. So a
//     local share starts empty, and is emptied again (Drain) whenever the
//     shared bucket grants this process a slot. A process whose share
//     filled while other processes used the shared bucket still opens an
//     outage with its share's burst: at most N·max(1, ⌊b/N⌋) more across
//     the fleet (at most b when N ≤ b, N when N > b).
//   - End: the shared bucket comes back full, unaware of the local pushes
//     just made. So the pacer counts them (Pending), and the process's
//     first reservation after the outage books them too (n = 1 + pending,
//     at most the burst), which pushes the bucket's schedule back by what
//     was spent locally. A process with no further push to that bucket
//     never pays its count back: at most its share's burst.
//
// The share is a fallback, not a substitute: it knows nothing of slots
// the shared bucket booked ahead before the outage (jobs that hold one
// still push at it), and processes that do not run take no share, so the
// fleet under-uses the limit while the outage lasts.

package fallback

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Pacer holds one local limiter per bucket. The zero value is not usable;
// make one with New. It is safe for concurrent use.
type Pacer struct {
	instances int

	mu      sync.Mutex
	buckets map[share]*local
}

// local is one bucket's share and the grants it made since the shared
// bucket last granted this process a slot.
type local struct {
	lim     *rate.Limiter
	pending int
}

// share identifies a local limiter: a bucket under one limit (a config
// change gives the bucket a new local limiter).
type share struct {
	key   string
	limit limiter.Limit
}

// New returns a Pacer for a fleet of at most instances processes (< 1 is
// taken as 1).
func New(instances int) *Pacer {
	return &Pacer{instances: max(instances, 1), buckets: map[share]*local{}}
}

// Instances is the N the limits are divided by.
func (p *Pacer) Instances() int { return p.instances }

// Share is the local limit of bucket b: rate ÷ N, burst ÷ N (at least 1).
func (p *Pacer) Share(b limiter.Limit) (rate.Limit, int) {
	return rate.Limit(b.Rate / float64(p.instances)), max(b.Burst/p.instances, 1)
}

// Reserve takes one token of every bucket's local share at now, if all of
// them have one within maxWait. It returns the delay until they all have
// (0: push now) and ok; when one has none within maxWait, it takes
// nothing and returns the delay that would have been needed and false.
func (p *Pacer) Reserve(buckets []limiter.Bucket, now time.Time, maxWait time.Duration) (time.Duration, bool) {
	return p.ReserveN(buckets, 1, now, maxWait)
}

// ReserveN is Reserve for n tokens, what a push on an endpoint metered by
// items costs. More than a share's burst is never granted (Share: an
// instant takes at most the burst).
func (p *Pacer) ReserveN(buckets []limiter.Bucket, n int, now time.Time, maxWait time.Duration) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var delay time.Duration
	rs := make([]*rate.Reservation, 0, len(buckets))
	for _, b := range buckets {
		r := p.limiter(b, now).ReserveN(now, n)
		rs = append(rs, r)
		if !r.OK() {
			delay = rate.InfDuration
			break
		}
		delay = max(delay, r.DelayFrom(now))
	}
	if delay <= maxWait {
		for _, b := range buckets {
			p.buckets[share{b.Key, b.Limit}].pending += n
		}
		return delay, true
	}
	for _, r := range rs {
		r.CancelAt(now)
	}
	return delay, false
}

// Pending is how many tokens of b's local share were granted and not yet
// booked in the shared bucket.
func (p *Pacer) Pending(b limiter.Bucket) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.buckets[share{b.Key, b.Limit}]; ok {
		return l.pending
	}
	return 0
}

// Drain empties the shares of buckets that exist at now, and forgets
// their pending grants: the shared bucket has just granted a slot (and
// booked the pending grants with it), so the fleet is spending the limit
// there. It creates none; a new share starts empty anyway.
func (p *Pacer) Drain(buckets []limiter.Bucket, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range buckets {
		if _, ok := p.buckets[share{b.Key, b.Limit}]; ok {
			p.buckets[share{b.Key, b.Limit}] = p.empty(b.Limit, now)
		}
	}
}

// limiter is b's local limiter, made empty at now if new.
func (p *Pacer) limiter(b limiter.Bucket, now time.Time) *rate.Limiter {
	k := share{b.Key, b.Limit}
	l, ok := p.buckets[k]
	if !ok {
		l = p.empty(b.Limit, now)
		p.buckets[k] = l
	}
	return l.lim
}

// empty is a share of l with no token at now.
func (p *Pacer) empty(l limiter.Limit, now time.Time) *local {
	r, burst := p.Share(l)
	lim := rate.NewLimiter(r, burst) // full
	lim.AllowN(now, burst)
	return &local{lim: lim}
}
