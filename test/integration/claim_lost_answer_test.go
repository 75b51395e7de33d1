package integration

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
)

// losingClaim loses the answer of the first claim of lane ref after it
// landed, as a store whose every attempt timed out after writing does.
type losingClaim struct {
	lane.DynamoDBAPI
	ref  string
	lose *atomic.Bool
}

func (f losingClaim) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := f.DynamoDBAPI.UpdateItem(ctx, in, o...)
	if _, claim := in.ExpressionAttributeValues[":next"]; claim && err == nil && claimedRef(in) == f.ref && f.lose.CompareAndSwap(true, false) {
		return nil, &types.InternalServerError{Message: aws.String("injected: the claim landed, its answer was lost")}
	}
	return out, err
}

// A deferred lane job whose claim landed but whose answer was lost keeps
// its lane: the claim moved the lane to the token it offered, which only
// that job knows, and the job carries it. Before, the job came back under
// its old token and found the lane another's: deferred again for its slot
// minutes ahead, its lease renewal was refused and it dropped itself as a
// duplicate ("coalesced"), leaving the lane owned and its changes pending
// until a change came after the lease; with none, never (the adversary's
// seed 39, lost answers and 64 connections: ~200 OTA days stale).
func TestJobWhoseClaimLostItsAnswerKeepsItsLane(t *testing.T) {
	t.Parallel()
	r, src, body := retryRig(t)
	ctx := context.Background()

	// The store's reads fail after the mark: both lanes' jobs are
	// deferred, so that their pushes claim.
	first := r.worker()
	first.State.DB = failingReads{first.State.DB}
	if out := first.HandleBatch(ctx, []syncer.Message{{ID: "1", Body: body}}); out[0].Err != nil {
		t.Fatalf("the change failed: %v", out[0].Err)
	}
	jobs := map[string]syncer.Message{}
	for range 2 {
		m := receiveOne(t, r, r.deferredURL, true)
		for _, ref := range []string{"BK-1", "BK-2"} {
			if strings.Contains(m.Body, "#"+ref+"@") {
				jobs[ref] = m
			}
		}
	}
	if len(jobs) != 2 {
		t.Fatalf("deferred jobs of lanes %v, want BK-1's and BK-2's", jobs)
	}

	lose := &atomic.Bool{}
	lose.Store(true)
	sy := r.worker()
	sy.Lanes.DB = losingClaim{DynamoDBAPI: sy.Lanes.DB, ref: "BK-1", lose: lose}
	sy.HandleBatch(ctx, []syncer.Message{jobs["BK-1"]})
	if lose.Load() {
		t.Fatal("BK-1's claim never lost its answer, so the test proves nothing")
	}
	back := receiveOne(t, r, r.deferredURL, true)
	if !strings.Contains(back.Body, "#BK-1@") {
		t.Fatalf("the job deferred after the lost answer is not lane BK-1's: %s", back.Body)
	}

	// Deferred again for a slot minutes ahead, the job renews its lease.
	j, err := job.Decode(back.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.worker().Task(j).Work.Hold(ctx, j, time.Now().Add(3*time.Minute)); err != nil {
		t.Errorf("the job, deferred 3 minutes, gave its lane up: %v", err)
	}

	// Back (twice: SQS is at least once), it pushes once, at once.
	outcomes := map[dispatch.Outcome]int{}
	for c := range 2 {
		out := r.worker().HandleBatch(ctx, []syncer.Message{back})[0]
		for _, res := range out.Jobs {
			t.Logf("copy %d: %s %s", c+1, res.Outcome, res.Reason)
			outcomes[res.Outcome]++
		}
	}
	if outcomes[dispatch.Pushed] != 1 || outcomes[dispatch.Coalesced] != 1 {
		t.Errorf("two copies of BK-1's job ended %v, want one pushed and one coalesced", outcomes)
	}
	r.worker().HandleBatch(ctx, []syncer.Message{jobs["BK-2"]})
	pushes := pushesPerLane(r)
	for _, ref := range []string{"BK-1", "BK-2"} {
		if pushes[ref] != 1 {
			t.Errorf("lane %s pushed %d times, want once", ref, pushes[ref])
		}
		src.assertNewest(t, otaCopy(t, r.pipeline), ref)
	}
	assertReleased(t, r)
}
