package integration

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sdkpipeline "github.com/fleetbucket/fleetbucket/sdk/pipeline"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// hangingVendor answers under /ok at once and never answers under /hang:
// a request there waits until its client gives up (or the test ends).
type hangingVendor struct {
	*httptest.Server
	stop chan struct{}
	mu   sync.Mutex
	hits map[string]int // by path prefix
}

func startHangingVendor(t *testing.T) *hangingVendor {
	v := &hangingVendor{stop: make(chan struct{}), hits: map[string]int{}}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefix, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		v.mu.Lock()
		v.hits[prefix]++
		v.mu.Unlock()
		if prefix == "hang" {
			select {
			case <-r.Context().Done():
			case <-v.stop:
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(func() { close(v.stop); v.Close() })
	return v
}

func (v *hangingVendor) hitsOf(prefix string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.hits[prefix]
}

// countingRetry counts what syncer.Retry would send again.
type countingRetry struct{ entries int }

func (c *countingRetry) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.entries += len(in.Entries)
	return &sqs.SendMessageBatchOutput{}, nil
}

// A vendor that never answers, on a max_in_flight endpoint, with the
// timeouts short (push_timeout 300ms): the push runs out of its own time
// and fails as a push. It is counted (the deferred job carries Failures 1)
// and deferred with a reason, the change's message succeeds (so Retry
// sends no copy to mark and push the property's healthy lane again), the
// healthy lane pushed once, and the lease is given back. Before the fix the
// lease's context ended with the push's budget, the dispatcher took the
// bare context error for the invocation ending, and the change failed.
func TestVendorHangPastTheLeaseIsAFailedPush(t *testing.T) {
	vendor := startHangingVendor(t)
	channel := func(name, path string) string {
		return fmt.Sprintf(`%q: {"base_url": %q, "allow_http": true,
      "endpoints": {"availability": {"path": "/v1/availability", "limit": {"rate": 20, "burst": 20}, "max_in_flight": 1, "lease_hold": "2s"}},
      "credentials": {"cred-1": {"token_env": "T"}}}`, name, vendor.URL+path)
	}
	cfg, err := config.Parse([]byte(`{"push_timeout": "300ms", "linger": "0s",
  "channels": {` + channel("booking_com", "/hang") + `, ` + channel("expedia", "/ok") + `},
  "properties": {"hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1"},
                                  {"channel": "expedia", "credential": "cred-1", "hotel_ref": "EX-1"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	db, q := emulator.DynamoDB(t), emulator.SQS(t)
	limiterTable, stateTable := emulator.NewTable(t, db), emulator.NewStateTable(t, db)
	deferredURL, deadURL := emulator.NewQueue(t, q, "deferred"), emulator.NewQueue(t, q, "dlq")
	p, err := sdkpipeline.New(cfg, sdkpipeline.Clients{DynamoDB: db, SQS: q},
		sdkpipeline.Names{LimiterTable: limiterTable, StateTable: stateTable, DeferredURL: deferredURL, DeadURL: deadURL},
		sdkpipeline.WithToken(func(string) string { return "tok" }), sdkpipeline.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}

	// The invocation's context has a minute: only the push's time runs out.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs := []syncer.Message{{ID: "1", Body: newPMS("hotel-aurora").change("availability", "DBL", "2027-03-01", "2027-03-02", 3)}}
	out := p.Syncer.HandleBatch(ctx, msgs)

	if out[0].Err != nil {
		t.Fatalf("the change failed (%v): a push that ran out of its time was taken for the invocation ending", out[0].Err)
	}
	retry := &countingRetry{}
	if sent := syncer.Retry(ctx, retry, "changes", msgs, out); len(sent) != 0 || retry.entries != 0 {
		t.Fatalf("Retry sends %d copies of the change; want none (each would mark and push the healthy lane again)", retry.entries)
	}
	var hung *dispatch.Result
	for i, r := range out[0].Jobs {
		if r.Channel == "booking_com" {
			hung = &out[0].Jobs[i]
		}
	}
	switch {
	case hung == nil:
		t.Fatalf("no result for the hanging vendor's lane among %+v", out[0].Jobs)
	case hung.Outcome != dispatch.Deferred || !strings.Contains(hung.Reason, "no answer"):
		t.Fatalf("the hanging vendor's push: %s %q; want deferred, with a reason that says it had no answer", hung.Outcome, hung.Reason)
	case hung.Wait < dispatch.DefaultPolicy.FailureBackoff:
		t.Errorf("deferred for %v, want the failure backoff (at least %v)", hung.Wait, dispatch.DefaultPolicy.FailureBackoff)
	}
	if n := vendor.hitsOf("ok"); n != 1 {
		t.Errorf("the healthy lane's vendor saw %d pushes, want 1", n)
	}
	if vendor.hitsOf("hang") < 1 {
		t.Errorf("the hanging vendor saw no request")
	}

	// The deferred job counts the failure, and its lease is free again.
	bodies := (&pipeline{t: t, sqs: q}).receiveAll(deferredURL, 1)
	j, err := job.Decode(bodies[0])
	if err != nil {
		t.Fatal(err)
	}
	if j.Failures != 1 {
		t.Errorf("the deferred job carries %d failures, want 1 (the push that had no answer)", j.Failures)
	}
	route, err := p.Syncer.Route(j)
	if err != nil {
		t.Fatal(err)
	}
	if held, err := p.Limiter.Leases(ctx, route.InFlight.Key); err != nil || len(held) != 0 {
		t.Errorf("leases of %s still held after the push: %+v (%v); want none", route.InFlight.Key, held, err)
	}
	dead, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &deadURL, MaxNumberOfMessages: 10})
	if err != nil || len(dead.Messages) != 0 {
		t.Errorf("dead letters: %+v (%v), want none", dead, err)
	}
}
