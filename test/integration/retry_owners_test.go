package integration

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
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// faultyLanes is a worker's lane store: its mark's answer is lost after
// the write landed (loseMark), and its claims are counted per hotel ref
// and, with gate set, held until both racing claims of a lane came.
type faultyLanes struct {
	lane.DynamoDBAPI
	loseMark *atomic.Bool
	claims   *claimCount
	gate     *claimGate
}

func (f faultyLanes) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, claim := in.ExpressionAttributeValues[":next"]; claim {
		ref := claimedRef(in)
		f.claims.add(ref)
		if f.gate != nil && ref == f.gate.ref {
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

// claimGate holds the claims of lane ref until two came, so that they race
// for certain; a claim that never comes lets the other go after a while.
type claimGate struct {
	ref string
	*barrier
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

// retryWorker is a worker whose lane writes go through faultyLanes.
func retryWorker(r *laneRig, f faultyLanes) *syncer.Syncer {
	sy := r.worker()
	f.DynamoDBAPI = sy.Lanes.DB
	sy.Lanes.DB = f
	return sy
}

// receiveOne long-polls url for one message and returns it as the sync
// function reads it (functions/sync: Attempt, Owners).
func receiveOne(t *testing.T, r *laneRig, url string, deferred bool) syncer.Message {
	t.Helper()
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); {
		out, err := r.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 1,
			WaitTimeSeconds: 20, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			continue
		}
		m := out.Messages[0]
		if _, err := r.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		attempt := syncer.AttemptOf(aws.ToString(m.MessageAttributes[syncer.RetryAttribute].StringValue))
		return syncer.Message{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Deferred: deferred, Redelivered: attempt > 0, Attempt: attempt,
			Owners: syncer.OwnersOf(aws.ToString(m.MessageAttributes[syncer.RetryOwnersAttribute].StringValue))}
	}
	t.Fatalf("no message arrived on %s", url)
	return syncer.Message{}
}

// failAndRetry hands body to first, which must fail, sends it again as
// the sync function does (syncer.Retry) and returns the copy.
func failAndRetry(t *testing.T, r *laneRig, first *syncer.Syncer, body string) syncer.Message {
	t.Helper()
	msgs := []syncer.Message{{ID: "1", Body: body}}
	out := first.HandleBatch(context.Background(), msgs)
	if out[0].Err == nil {
		t.Fatalf("the first delivery did not fail: %+v", out[0])
	}
	if sent := syncer.Retry(context.Background(), r.sqs, r.changesURL, msgs, out); !sent["1"] {
		t.Fatal("Retry did not send the failed change again")
	}
	return receiveOne(t, r, r.changesURL, false)
}

// A change whose delivery failed after its mark landed (its answer lost:
// the delivery never learned its tokens) is sent again by the worker
// (syncer.Retry). The copy knows the lanes its failed delivery holds and
// pushes them at once, through a claim, rather than deferring a recheck
// until the failed delivery's lease (2 minutes) runs out: once per lane.
func TestRetriedChangePushesAsSoonAsTheStoreAnswers(t *testing.T) {
	t.Parallel()
	r, src, body := retryRig(t)
	var claims claimCount
	lose := &atomic.Bool{}
	lose.Store(true)
	again := failAndRetry(t, r, retryWorker(r, faultyLanes{loseMark: lose, claims: &claims}), body)
	if again.Attempt != 1 || len(again.Owners) == 0 {
		t.Fatalf("the copy came back with attempt %d and owners %v, want attempt 1 and what its failed delivery held", again.Attempt, again.Owners)
	}

	out := retryWorker(r, faultyLanes{claims: &claims}).HandleBatch(context.Background(), []syncer.Message{again})[0]
	if out.Err != nil {
		t.Fatalf("the copy failed with the store back: %v", out.Err)
	}
	pushes := pushesPerLane(r)
	for _, ref := range []string{"BK-1", "BK-2"} {
		if pushes[ref] != 1 || claims.of(ref) != 1 {
			t.Errorf("lane %s: pushed %d times by the copy, through %d claims; want once, through a claim (results %+v)", ref, pushes[ref], claims.of(ref), out.Jobs)
		}
		src.assertNewest(t, otaCopy(t, r.pipeline), ref)
	}
	assertReleased(t, r)
}

// The copy of a failed change claims the lanes its failed delivery held
// (never the claim-free first push): a job of that delivery deferred under
// the same token may come back at the same moment, and of the two racing
// claims exactly one wins, so the lane is pushed once. Here the first
// delivery's render failed (the store went out after its mark): lane
// BK-1's job was deferred, lane BK-2's deferral failed too, which failed
// the change.
func TestRetriedChangeRacingItsDeferredJobPushesOnce(t *testing.T) {
	t.Parallel()
	r, src, body := retryRig(t)
	var claims claimCount
	first := retryWorker(r, faultyLanes{claims: &claims})
	first.State.DB = failingReads{first.State.DB}
	first.Dispatcher.Queue = &queue.Queue{SQS: failingDefer{SQSAPI: r.sqs, ref: "BK-2"}, DeferredURL: r.deferredURL, DeadURL: r.dlqURL}
	again := failAndRetry(t, r, first, body)
	deferred := receiveOne(t, r, r.deferredURL, true)
	if !strings.Contains(deferred.Body, "#BK-1@") {
		t.Fatalf("the deferred job is not lane BK-1's: %s", deferred.Body)
	}

	gate := &claimGate{ref: "BK-1", barrier: newBarrier(2)}
	var wg sync.WaitGroup
	outs := make([]syncer.MessageResult, 2)
	for i, m := range []syncer.Message{again, deferred} {
		sy := retryWorker(r, faultyLanes{claims: &claims, gate: gate})
		wg.Go(func() { outs[i] = sy.HandleBatch(context.Background(), []syncer.Message{m})[0] })
	}
	wg.Wait()
	for _, out := range outs {
		if out.Err != nil {
			t.Fatalf("a racing delivery failed: %v", out.Err)
		}
	}
	pushes := pushesPerLane(r)
	for ref, wantClaims := range map[string]int{"BK-1": 2, "BK-2": 1} {
		if pushes[ref] != 1 || claims.of(ref) != wantClaims {
			t.Errorf("lane %s: pushed %d times through %d claims; want once, the copy's claim racing the deferred job's (%d in all)", ref, pushes[ref], claims.of(ref), wantClaims)
		}
		src.assertNewest(t, otaCopy(t, r.pipeline), ref)
	}
	assertReleased(t, r)
}

// retryRig is a two-lane rig that pushes at once, and a change to them.
func retryRig(t *testing.T) (*laneRig, *pms, string) {
	t.Helper()
	lim := limiter.PerSecond(20, 10)
	r := newLaneRig(t, lim, mockota.Config{Limit: limiter.PerSecond(100, 50)}, lanesConfig(lim, 2))
	r.linger = -1
	src := newPMS("hotel-aurora")
	return r, src, src.change("rates", "DBL", "2027-01-05", "2027-01-07", 1)
}
