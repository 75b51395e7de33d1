// Package localshare paces one process's pushes while the fleet's shared
// bucket cannot be reached: each process takes an equal share of every
// limit, so that the fleet as a whole still stays within it.
//
// With N processes at most (the function's maximum concurrency), each one
// paces a bucket of rate r and burst b with a local token bucket
// (golang.org/x/time/rate) of rate r/N and burst max(1, ⌊b/N⌋). Summed over
// the fleet, the rate is r again. The burst is b again when N ≤ b; when
// N > b each process still needs one token to push at all, so the fleet's
// burst may reach N: an outage with more live processes than the limit's
// burst can open with up to N requests at once, then settles to r.
//
// A local limiter starts empty, and is emptied again (Drain) whenever the
// shared bucket grants this process a slot: the shared bucket may have
// granted its whole burst just before the outage, and N local bursts on
// top of it would exceed the limit. From empty, the fleet's local grants
// over any window u are at most r·u, so that with what the shared bucket
// granted before (at most b + r·w over a window w) a window that spans the
// start of the outage still holds at most b + r·(w+u). A process whose
// share filled while other processes used the shared bucket opens an
// outage with its share's burst: at most b more across the fleet.
//
// The share is a fallback, not a substitute: it knows nothing of slots
// the shared bucket booked ahead before the outage (jobs that hold one
// still push at it), and processes that do not run take no share, so the
// fleet under-uses the limit while the outage lasts.
package localshare

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

// local is one bucket's share.
type local struct{ lim *rate.Limiter }

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
	p.mu.Lock()
	defer p.mu.Unlock()
	var delay time.Duration
	rs := make([]*rate.Reservation, 0, len(buckets))
	for _, b := range buckets {
		r := p.limiter(b, now).ReserveN(now, 1)
		rs = append(rs, r)
		if !r.OK() {
			delay = rate.InfDuration
			break
		}
		delay = max(delay, r.DelayFrom(now))
	}
	if delay <= maxWait {
		return delay, true
	}
	for _, r := range rs {
		r.CancelAt(now)
	}
	return delay, false
}

// Drain empties the shares of buckets that exist at now: the shared
// bucket has just granted a slot, so the fleet is spending the limit
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
