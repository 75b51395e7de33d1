package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/poller"
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

func (l tracedLimiter) ReserveAhead(ctx context.Context, b limiter.Bucket, n int, maxDelay, ahead time.Duration) (limiter.Reservation, error) {
	start := time.Now()
	r, err := l.Limiter.ReserveAhead(ctx, b, n, maxDelay, ahead)
	took := time.Since(start).Milliseconds()
	if wait, denied := limiter.RetryAfter(err); denied {
		l.t.event("denied", b.Key, "burst=%d horizon=%v ahead=%d wait=%d took=%d", b.Limit.Burst, maxDelay, ahead.Milliseconds(), wait.Milliseconds(), took)
	} else if err != nil {
		l.t.event("reserve-error", b.Key, "err=%v took=%d", err, took)
	} else {
		l.t.event("granted", b.Key, "burst=%d horizon=%v ahead=%d slot=%d took=%d", b.Limit.Burst, maxDelay, ahead.Milliseconds(), l.t.since(r.Slot), took)
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

// traceBatch traces one handled batch: a line per message with its queue,
// receive count and, if it failed (left for redelivery), why; the change
// events by their event id, so that a late change's message can be found.
func traceBatch(t *tracer, msgs []sqstypes.Message, results []syncer.MessageResult, deferred bool, took time.Duration) {
	queue := map[bool]string{false: "changes", true: "deferred"}[deferred]
	for i, m := range msgs {
		id := messageName(m, deferred)
		receives := m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)]
		t.event("handled", id, "queue=%s batch=%d receives=%s took=%d failed=%v err=%q", queue, len(msgs), receives, took.Milliseconds(), results[i].Err != nil, fmt.Sprint(results[i].Err))
	}
}

// tracedReceiver traces each receive that returned messages: their event
// or job ids with their receive counts, and the SDK's attempts when it
// retried. A message received but never handled (its receive's answer lost
// on the way, or a retried receive whose first attempt the emulator served)
// shows here, or by its absence here, and comes back after the visibility
// timeout with a receive count of 2.
type tracedReceiver struct {
	poller.SQSAPI
	t     *tracer
	queue string
}

func (r tracedReceiver) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	start := time.Now()
	out, err := r.SQSAPI.ReceiveMessage(ctx, in, o...)
	took := time.Since(start).Milliseconds()
	if err != nil {
		r.t.event("receive-error", r.queue, "err=%v took=%d", err, took)
		return out, err
	}
	attempts, failed := 1, []string(nil)
	if res, ok := retry.GetAttemptResults(out.ResultMetadata); ok {
		attempts = len(res.Results)
		for _, a := range res.Results {
			if a.Err != nil {
				failed = append(failed, a.Err.Error())
			}
		}
	}
	if len(out.Messages) == 0 && attempts == 1 {
		return out, nil
	}
	ids := make([]string, len(out.Messages))
	for i, m := range out.Messages {
		ids[i] = messageName(m, r.queue == "deferred") + "/" + m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)]
	}
	r.t.event("received", r.queue, "n=%d attempts=%d took=%d %v failed-attempts=%q", len(ids), attempts, took, ids, failed)
	return out, nil
}

// messageName is a change message's event id or a deferred job's id.
func messageName(m sqstypes.Message, deferred bool) string {
	body := aws.ToString(m.Body)
	if deferred {
		if j, err := job.Decode(body); err == nil {
			return j.ID
		}
	} else {
		var ev struct {
			ID string `json:"id"`
		}
		if json.Unmarshal([]byte(body), &ev) == nil && ev.ID != "" {
			return ev.ID
		}
	}
	return aws.ToString(m.MessageId)
}
