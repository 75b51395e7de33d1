package sim

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A change whose delivery failed after its mark landed (its answer lost:
// the delivery never learned its tokens) is sent again by the worker
// (syncer.Retry). The copy knows the lanes its failed delivery holds and
// pushes them at once, through a claim, rather than deferring a recheck
// until the failed delivery's lease (2 minutes) runs out: once per lane.
// The lost answer is injected; SQS is played as functions/sync reads it
// (the retry's attributes, after its delay).
func TestRetriedChangePushesAsSoonAsTheStoreAnswers(t *testing.T) {
	m, src, body := retryLanes(t)
	var claims claimCount
	lose := &atomic.Bool{}
	lose.Store(true)
	again := failAndRetry(t, m, retryWorker(m, faultyLanes{loseMark: lose, claims: &claims}, nil), body)
	if again.Attempt != 1 || len(again.Owners) == 0 {
		t.Fatalf("the copy came back with attempt %d and owners %v, want attempt 1 and what its failed delivery held", again.Attempt, again.Owners)
	}

	out := retryWorker(m, faultyLanes{claims: &claims}, nil).HandleBatch(context.Background(), []syncer.Message{again})[0]
	if out.Err != nil {
		t.Fatalf("the copy failed with the store back: %v", out.Err)
	}
	pushes := lanePushes(m.ota)
	for _, ref := range []string{"BK-1", "BK-2"} {
		if pushes[ref] != 1 || claims.of(ref) != 1 {
			t.Errorf("lane %s: pushed %d times by the copy, through %d claims; want once, through a claim (results %+v)", ref, pushes[ref], claims.of(ref), out.Jobs)
		}
		src.assertNewest(t, m.ota, ref)
	}
	assertAuroraReleased(t, m)
}

// The copy of a failed change claims the lanes its failed delivery held
// (never the claim-free first push): a job of that delivery deferred under
// the same token may come back at the same moment, and of the two racing
// claims exactly one wins, so the lane is pushed once. Here the first
// delivery's render failed (the store went out after its mark): lane
// BK-1's job was deferred, lane BK-2's deferral failed too, which failed
// the change. Each of the racing deliveries runs on a worker of its own.
func TestRetriedChangeRacingItsDeferredJobPushesOnce(t *testing.T) {
	m, src, body := retryLanes(t)
	var claims claimCount
	first := retryWorker(m, faultyLanes{claims: &claims}, func(sy *syncer.Syncer, d *dispatch.Dispatcher) {
		sy.State.DB = failingReads{sy.State.DB}
		d.Queue = &queue.Queue{SQS: failingDefer{SQSAPI: m.sent, ref: "BK-2"}, DeferredURL: deferredURL, DeadURL: deadURL, Now: m.clock.Now}
	})
	again := failAndRetry(t, m, first, body)
	bodies := m.sent.take(deferredURL)
	if len(bodies) != 1 || !strings.Contains(bodies[0], "#BK-1@") {
		t.Fatalf("deferred %q, want lane BK-1's job alone", bodies)
	}
	deferred := syncer.Message{ID: "deferred", Body: bodies[0], Deferred: true}

	gate := &markGate{want: 2, all: make(chan struct{})}
	var wg sync.WaitGroup
	outs := make([]syncer.MessageResult, 2)
	for i, msg := range []syncer.Message{again, deferred} {
		sy := retryWorker(m, faultyLanes{claims: &claims, gate: gate, gateRef: "BK-1"}, nil)
		wg.Go(func() { outs[i] = sy.HandleBatch(context.Background(), []syncer.Message{msg})[0] })
	}
	wg.Wait()
	for _, out := range outs {
		if out.Err != nil {
			t.Fatalf("a racing delivery failed: %v", out.Err)
		}
	}
	pushes := lanePushes(m.ota)
	for ref, wantClaims := range map[string]int{"BK-1": 2, "BK-2": 1} {
		if pushes[ref] != 1 || claims.of(ref) != wantClaims {
			t.Errorf("lane %s: pushed %d times through %d claims; want once, the copy's claim racing the deferred job's (%d in all)", ref, pushes[ref], claims.of(ref), wantClaims)
		}
		src.assertNewest(t, m.ota, ref)
	}
	assertAuroraReleased(t, m)
}

// retryLanes is one store, clock and vendor for two lanes (BK-1, BK-2)
// of hotel-aurora's rates that push at once, and a change to them.
func retryLanes(t *testing.T) (*memLanes, *pmsOracle, string) {
	t.Helper()
	lim := limiter.PerSecond(20, 10)
	m := newMemLanes(t, mockota.Config{Limit: limiter.PerSecond(100, 50)}, connconfig.Credentials(lim, 2), nil)
	src := newPMSOracle("hotel-aurora")
	return m, src, src.change("rates", "DBL", "2027-01-05", "2027-01-07", 1)
}

// retryWorker is a worker of its own on m whose lane store is f.
func retryWorker(m *memLanes, f faultyLanes, tune func(*syncer.Syncer, *dispatch.Dispatcher)) *syncer.Syncer {
	m.t.Helper()
	f.DynamoDBAPI = m.store
	return m.worker(&lane.Store{DB: f, Table: "state", Now: m.clock.Now}, tune)
}

// failAndRetry hands body to first, which must fail, sends it again as
// the sync function does (syncer.Retry) and returns the copy as the sync
// function reads it after its delay (its attempt and owners from the
// message's attributes).
func failAndRetry(t *testing.T, m *memLanes, first *syncer.Syncer, body string) syncer.Message {
	t.Helper()
	msgs := []syncer.Message{{ID: "1", Body: body}}
	out := first.HandleBatch(context.Background(), msgs)
	if out[0].Err == nil {
		t.Fatalf("the first delivery did not fail: %+v", out[0])
	}
	var q retryQueue
	if sent := syncer.Retry(context.Background(), &q, "changes", msgs, out); !sent["1"] || len(q.entries) != 1 {
		t.Fatalf("Retry sent %d messages (%v), want the failed change again", len(q.entries), sent)
	}
	e := q.entries[0]
	m.clock.Advance(time.Duration(e.DelaySeconds) * time.Second)
	attempt := syncer.AttemptOf(aws.ToString(e.MessageAttributes[syncer.RetryAttribute].StringValue))
	return syncer.Message{ID: "retried", Body: aws.ToString(e.MessageBody), Redelivered: attempt > 0, Attempt: attempt,
		Owners: syncer.OwnersOf(aws.ToString(e.MessageAttributes[syncer.RetryOwnersAttribute].StringValue))}
}

// retryQueue keeps what syncer.Retry sends, every entry accepted.
type retryQueue struct {
	entries []sqstypes.SendMessageBatchRequestEntry
}

func (q *retryQueue) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		q.entries = append(q.entries, e)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: e.Id})
	}
	return out, nil
}

// faultyLanes is a worker's lane store: its mark's answer is lost after
// the write landed (loseMark), and its claims are counted per hotel ref
// and, with gate set, the claims of lane gateRef held until both racing
// claims came.
type faultyLanes struct {
	lane.DynamoDBAPI
	loseMark *atomic.Bool
	claims   *claimCount
	gate     *markGate
	gateRef  string
}

func (f faultyLanes) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, claim := in.ExpressionAttributeValues[":next"]; claim {
		ref := claimedRef(in)
		f.claims.add(ref)
		if f.gate != nil && ref == f.gateRef {
			// A claim that never comes lets the other go after a while.
			wait, cancel := context.WithTimeout(ctx, 20*time.Second)
			f.gate.arrive(wait)
			cancel()
		}
	}
	out, err := f.DynamoDBAPI.UpdateItem(ctx, in, o...)
	if err == nil && f.loseMark != nil && strings.HasPrefix(*in.UpdateExpression, "ADD ") && f.loseMark.CompareAndSwap(true, false) {
		return nil, &types.InternalServerError{Message: aws.String("injected: the mark landed, its answer was lost")}
	}
	return out, err
}

// claimedRef is the hotel ref of the lane a claim names.
func claimedRef(in *dynamodb.UpdateItemInput) string {
	for _, name := range in.ExpressionAttributeNames {
		if strings.HasPrefix(name, "o:") {
			return name[strings.LastIndex(name, "#")+1:]
		}
	}
	return ""
}

type claimCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *claimCount) add(ref string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[ref]++
}

func (c *claimCount) of(ref string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[ref]
}

// failingReads fails the ARI store's reads: a push's render.
type failingReads struct{ ari.DynamoDBAPI }

func (failingReads) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return nil, &types.InternalServerError{Message: aws.String("injected: DynamoDB unreachable")}
}

// failingDefer fails the deferral of the jobs of lane ref.
type failingDefer struct {
	queue.SQSAPI
	ref string
}

func (f failingDefer) SendMessage(ctx context.Context, in *sqs.SendMessageInput, o ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if strings.Contains(aws.ToString(in.MessageBody), "#"+f.ref+"@") {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String("injected: SQS unreachable")}
	}
	return f.SQSAPI.SendMessage(ctx, in, o...)
}

// lanePushes counts the vendor's accepted pushes per hotel ref.
func lanePushes(ota *mockota.Server) map[string]int {
	out := map[string]int{}
	for _, req := range ota.Accepted() {
		// A lane job's id is the lane (…#hotel ref) @ its owner token.
		name, _, _ := strings.Cut(req.JobID, "@")
		out[name[strings.LastIndex(name, "#")+1:]]++
	}
	return out
}

// assertAuroraReleased fails unless no lane of hotel-aurora's rates is
// owned or has anything pending.
func assertAuroraReleased(t *testing.T, m *memLanes) {
	t.Helper()
	for name := range memLaneItem(t, m.store, "hotel-aurora#rates") {
		if strings.HasPrefix(name, "o:") || strings.HasPrefix(name, "d:") {
			t.Errorf("lane item still holds %s: want every lane released with nothing pending", name)
		}
	}
}
