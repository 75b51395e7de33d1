package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A route that takes only tokens free at once (Route.OneAsker: a resync's
// bulk pushes, Horizon ≈ 0) is denied until its bucket's tat has come, and
// N jobs waiting on one bucket would each ask at every free token: N
// conditional writes for one grant (measured: 4.5 failed limiter writes a
// bulk push at 10 hotels a bucket, 10.8 at 30). So the jobs of one process
// ask in turn: one asks, the others wait in process, and the next ask goes
// when the last answer says a token is free (a grant's slot plus one
// interval, a denial's Retry-After), with no spread, since no other job of
// the process asks with it. What the process does not know (live pushes
// booking ahead meanwhile, other processes' askers) costs a denial, which
// tells the next free token.

// askers is a process's ask schedule per bucket key.
type askers struct {
	mu sync.Mutex
	m  map[string]*askTurn
}

// askTurn is one bucket's: whether a job is asking now, and when the next
// ask may go.
type askTurn struct {
	asking  bool
	next    time.Time
	waiting int
}

// take gives the caller the bucket's turn to ask at now, or says how long
// to wait before trying again: until the next free token if no job asks,
// or poll (a fraction of an interval) while one does. A waiter counts
// itself once (counted) so that a deferral spreads by the crowd.
func (a *askers) take(key string, now time.Time, poll time.Duration, counted bool) (turn bool, wait time.Duration, behind int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*askTurn{}
	}
	g := a.m[key]
	if g == nil {
		g = &askTurn{}
		a.m[key] = g
	}
	switch {
	case g.asking:
		wait = poll
	case now.Before(g.next):
		wait = g.next.Sub(now)
	default:
		g.asking = true
		if counted {
			g.waiting--
		}
		return true, 0, 0
	}
	if !counted {
		g.waiting++
	}
	return false, wait, g.waiting
}

// leave takes back a waiter that gives up waiting (deferred).
func (a *askers) leave(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g := a.m[key]; g != nil && g.waiting > 0 {
		g.waiting--
	}
}

// answered ends the turn: the next ask may go at next (zero: at once).
func (a *askers) answered(key string, next time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g := a.m[key]; g != nil {
		g.asking, g.next = false, next
	}
}

// inTurn waits, within the call's hold, for j's turn to ask its bucket, and
// returns a func that ends the turn with the bucket's next free token.
// done: j was deferred instead (res says so), to come back when the jobs
// ahead of it in this process have had about one token each.
func (d *Dispatcher) inTurn(ctx context.Context, j job.Job, t *task) (end func(next time.Time), res Result, done bool, err error) {
	key := t.Bucket.Key
	T := time.Duration(t.Bucket.Limit.Interval()) * time.Microsecond
	poll := max(T/4, time.Millisecond)
	counted := false
	for {
		turn, wait, behind := d.askers.take(key, d.now(), poll, counted)
		if turn {
			return func(next time.Time) { d.askers.answered(key, next) }, Result{}, false, nil
		}
		counted = true
		if !d.canSleep(ctx, t, wait) {
			d.askers.leave(key)
			res, err := d.deferJob(ctx, j, t, max(wait, time.Duration(behind)*T), "waiting behind its bucket's asker")
			return nil, res, true, err
		}
		if err := d.sleep(ctx, wait); err != nil {
			d.askers.leave(key)
			return nil, Result{}, true, err
		}
	}
}
