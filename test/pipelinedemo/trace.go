package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// tracer writes one line per event a worker sees (-trace), for finding
// where a run's time goes: "ms kind lane detail", ms since the run began.
type tracer struct {
	mu    sync.Mutex
	w     *bufio.Writer
	f     io.Closer
	start time.Time
}

func newTracer(path string) (*tracer, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &tracer{w: bufio.NewWriter(f), f: f, start: time.Now()}, nil
}

func (t *tracer) event(kind, id, format string, args ...any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lane, _, _ := strings.Cut(id, "@")
	fmt.Fprintf(t.w, "%d %s %s %s\n", time.Since(t.start).Milliseconds(), kind, lane, fmt.Sprintf(format, args...))
}

func (t *tracer) close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.w.Flush()
	t.f.Close()
}

func (t *tracer) since(at time.Time) int64 {
	if at.IsZero() {
		return -1
	}
	return at.Sub(t.start).Milliseconds()
}

// tracedLimiter traces reservations; the rest is the limiter's.
type tracedLimiter struct {
	*limiter.Limiter
	t *tracer
}

func (l tracedLimiter) Reserve(ctx context.Context, b limiter.Bucket, n int, maxDelay time.Duration) (limiter.Reservation, error) {
	start := time.Now()
	r, err := l.Limiter.Reserve(ctx, b, n, maxDelay)
	took := time.Since(start).Milliseconds()
	if wait, denied := limiter.RetryAfter(err); denied {
		l.t.event("denied", b.Key, "burst=%d horizon=%v wait=%d took=%d", b.Limit.Burst, maxDelay, wait.Milliseconds(), took)
	} else if err != nil {
		l.t.event("reserve-error", b.Key, "err=%v took=%d", err, took)
	} else {
		l.t.event("granted", b.Key, "burst=%d horizon=%v slot=%d took=%d", b.Limit.Burst, maxDelay, l.t.since(r.Slot), took)
	}
	return r, err
}

type tracedPusher struct {
	dispatch.Pusher
	t *tracer
}

func (p tracedPusher) Push(ctx context.Context, req otapush.Request) (otapush.Response, error) {
	p.t.event("push", req.JobID, "slot=%d", p.t.since(req.Slot))
	return p.Pusher.Push(ctx, req)
}

type tracedQueue struct {
	dispatch.Queue
	t *tracer
}

func (q tracedQueue) Defer(ctx context.Context, j job.Job, wait time.Duration) error {
	q.t.event("defer", j.ID, "wait=%d slot=%d", wait.Milliseconds(), q.t.since(j.Hold.At))
	return q.Queue.Defer(ctx, j, wait)
}

func (l tracedLimiter) ReserveBatch(ctx context.Context, b limiter.Bucket, req limiter.BatchRequest) (limiter.Batch, error) {
	start := time.Now()
	batch, err := l.Limiter.ReserveBatch(ctx, b, req)
	took := time.Since(start).Milliseconds()
	if err != nil {
		l.t.event("batch-refused", b.Key, "burst=%d n=%d horizon=%v err=%v took=%d", b.Limit.Burst, req.N, req.MaxDelay, err, took)
		return batch, err
	}
	slots := make([]int64, len(batch.Slots))
	for i, s := range batch.Slots {
		slots[i] = l.t.since(s)
	}
	l.t.event("batch-granted", b.Key, "burst=%d n=%d horizon=%v slots=%v took=%d", b.Limit.Burst, req.N, req.MaxDelay, slots, took)
	return batch, nil
}
