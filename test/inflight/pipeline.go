package inflight

import (
	"context"
	"fmt"
	"github.com/fleetbucket/fleetbucket/test/payloadjob"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// The pipeline path: each pusher hands jobs to a dispatch.Dispatcher
// whose route has max_in_flight (Route.InFlight), as the sync function
// does: the token from the route's bucket (Reserve) and the lease
// (dispatch.Leases over a limiter.LeaseGate; the lease first while this
// process's pushes queue for one), the request through
// otapush, the release. The vendor learns the process from the route's
// X-Process header and the job from X-Job-Id, and the lease from the
// query the worker's transport adds (the push's otapush.Request.Lease,
// which leasedPusher hands it in headers), as the direct path sends it.
//
// The queue is this process's own (pipelineQueue): a deferred job is
// handed back to a pusher after its wait, and a dead letter is an error.
// What is measured is the limiter's store, which is the real one.

// pipelineRoute is the one route every job of the run takes: a bucket
// loose enough never to bind (the leases do), and the lease set.
func pipelineRoute(f workerFlags) dispatch.Route {
	return dispatch.Route{
		Bucket:   limiter.Bucket{Key: f.key, Limit: limiter.PerSecond(1000, 100)},
		URL:      f.url,
		Header:   http.Header{"X-Process": {strconv.Itoa(f.process)}},
		InFlight: &limiter.InFlight{Key: f.key, Max: f.max, Hold: f.hold, Timeout: f.timeout},
	}
}

type fixedRoute dispatch.Route

func (r fixedRoute) Route(job.Job) (dispatch.Route, error) { return dispatch.Route(r), nil }

// pipelineQueue is the process's deferred queue: jobs come back on ready.
type pipelineQueue struct {
	ready chan job.Job
	mu    sync.Mutex
	dead  []string
}

func (q *pipelineQueue) Defer(_ context.Context, j job.Job, wait time.Duration) error {
	j.Deferrals++
	time.AfterFunc(wait, func() {
		select {
		case q.ready <- j:
		default: // the run is over
		}
	})
	return nil
}

func (q *pipelineQueue) DeadLetter(_ context.Context, _, reason string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dead = append(q.dead, reason)
	return nil
}

// runPipeline runs f's pushers through a dispatcher until end.
func runPipeline(ctx context.Context, f workerFlags, l *limiter.Limiter, client *http.Client, end time.Time, note func(func(*WorkerReport))) error {
	client = &http.Client{Transport: leaseNamer{client.Transport}}
	pusher, err := otapush.New(client, l, otapush.Policy{MaxAttempts: 1, MaxElapsed: f.timeout, BaseBackoff: 10 * time.Millisecond,
		MaxBackoff: 100 * time.Millisecond, DefaultRetryAfter: time.Second, MaxRetryAfter: time.Minute})
	if err != nil {
		return err
	}
	q := &pipelineQueue{ready: make(chan job.Job, 1024)}
	policy := dispatch.DefaultPolicy
	// A push waits for a lease within the call's hold: the whole run, so
	// that what is measured is the leases, not trips through a queue.
	policy.MaxHold = time.Until(end) + time.Second
	d := payloadjob.Dispatcher{Dispatcher: &dispatch.Dispatcher{Limiter: l, Pusher: leasedPusher{pusher}, Queue: q, Policy: policy,
		Leases: dispatch.NewLeases(limiter.NewLeaseGate(l))}, Routes: fixedRoute(pipelineRoute(f))}
	if err := d.Validate(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for w := range f.pushers {
		wg.Go(func() {
			for n := 0; time.Now().Before(end); n++ {
				var j job.Job
				select {
				case j = <-q.ready:
				default:
					j = job.Job{ID: fmt.Sprintf("p%d-w%d-%d", f.process, w, n), Channel: "inflight", Credential: "c", Endpoint: "availability",
						FirstSeen: time.Now(), Payload: []byte(`{}`)}
				}
				res, err := d.Do(ctx, d.Task(j), end)
				switch {
				case err != nil:
					note(func(r *WorkerReport) { r.errorf(err) })
					time.Sleep(10 * time.Millisecond)
				case res.Outcome == dispatch.Pushed:
					note(func(r *WorkerReport) { r.Pushes++ })
				case res.Outcome == dispatch.Deferred:
					note(func(r *WorkerReport) { r.Busy++ })
				default:
					note(func(r *WorkerReport) { r.errorf(fmt.Errorf("job %s %s: %s", j.ID, res.Outcome, res.Reason)) })
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// leasedPusher hands the push's lease (otapush.Request.Lease) to the
// transport, in headers that leaseNamer takes off again.
type leasedPusher struct{ next dispatch.Pusher }

func (p leasedPusher) Push(ctx context.Context, req otapush.Request) (otapush.Response, error) {
	if req.Lease == nil {
		return otapush.Response{}, fmt.Errorf("push of %s without a lease", req.JobID)
	}
	req.Header = req.Header.Clone()
	req.Header.Set(leaseSlot, strconv.Itoa(req.Lease.Slot))
	req.Header.Set(leaseOwner, req.Lease.Owner)
	req.Header.Set(leaseExpires, strconv.FormatInt(req.Lease.Expires.UnixMicro(), 10))
	return p.next.Push(ctx, req)
}

const (
	leaseSlot    = "X-Lease-Slot"
	leaseOwner   = "X-Lease-Owner"
	leaseExpires = "X-Lease-Expires"
)

// leaseNamer adds the push's lease to its URL, for the vendor's record.
type leaseNamer struct{ next http.RoundTripper }

func (t leaseNamer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	q := req.URL.Query()
	q.Set("job", req.Header.Get("X-Job-Id"))
	q.Set("process", req.Header.Get("X-Process"))
	q.Set("slot", req.Header.Get(leaseSlot))
	q.Set("owner", req.Header.Get(leaseOwner))
	q.Set("expires", req.Header.Get(leaseExpires))
	for _, h := range []string{leaseSlot, leaseOwner, leaseExpires} {
		req.Header.Del(h)
	}
	req.URL.RawQuery = q.Encode()
	return t.next.RoundTrip(req)
}
