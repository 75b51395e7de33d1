package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestLaneJobPath follows one PMS change through the function with the
// defaults, as the event sources would hand it over: its invocation marks
// the lane and serves its job, and each deferred message of the job is
// another invocation, until the vendor has the push and no message is
// left. It is the path scripts/pathtrace.sh counts: with
// FLEETBUCKET_PATHTRACE set to a file, it writes "MARK begin" and
// "MARK end" around the invocations, and the build the script
// instruments writes a line per call into a function of sdk/pipeline
// between them.
func TestLaneJobPath(t *testing.T) {
	var pushes atomic.Int64
	ota := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		pushes.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer ota.Close()
	r := newRig(t, ota.URL)
	ctx := context.Background()
	body := `{"version":"0","id":"ev-1","detail-type":"ARI change","source":"pms","time":"2026-12-01T00:00:00Z","detail":` +
		`{"event_id":"ev-1","property_id":"hotel-1","sequence":1,"kind":"rates","room_type":"DBL","rate_plan":"BAR","from":"2027-01-05","to":"2027-01-06","values":{"price":120}}}`
	if _, err := r.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &r.changesURL, MessageBody: &body}); err != nil {
		t.Fatal(err)
	}
	ev, ok := r.receive(t, 20*time.Second)
	if !ok {
		t.Fatal("the change never arrived on the changes queue")
	}
	ev.Records = oneDelivery(t, ev.Records)
	mark(t, "begin")
	invocations := 1
	if resp := r.handle(t, ev); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the change failed: %+v", resp.BatchItemFailures)
	}
	for {
		ev, ok := r.receiveDeferred(t, 15*time.Second)
		if !ok {
			break
		}
		invocations++
		resp, err := r.h.Handle(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("a deferred job failed: %v %+v", err, resp.BatchItemFailures)
		}
		for _, rec := range ev.Records {
			if _, err := r.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &r.deferredURL, ReceiptHandle: aws.String(rec.ReceiptHandle)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mark(t, "end")
	if n := pushes.Load(); n != 1 {
		t.Fatalf("the vendor had %d pushes of the change's lane, want 1", n)
	}
	t.Logf("%d invocations", invocations)
}

// oneDelivery is the first of recs, the change's copies received at once.
// SQS delivers at least once: on a loaded machine a SendMessage whose
// answer is slow and which the SDK sends again lands twice, and the
// function, handed both, applies the copy too (its sequence is not newer:
// no mark, no push). The copy's parse, connections, state and codes would
// enter ari/state.go, config/config.go and syncer/connections.go a third
// time, a path that is not the lane job's: the path is one delivery's.
func oneDelivery(t *testing.T, recs []events.SQSMessage) []events.SQSMessage {
	t.Helper()
	for _, rec := range recs[1:] {
		if rec.Body != recs[0].Body {
			t.Fatalf("the changes queue held another message than the change: %s", rec.Body)
		}
	}
	if len(recs) > 1 {
		t.Logf("the change arrived %d times at once: the path is the first's", len(recs))
	}
	return recs[:1]
}

// receiveDeferred long-polls the deferred queue until a message arrives
// or within passes, as its event source would hand it to the function.
func (r *retryRig) receiveDeferred(t *testing.T, within time.Duration) (events.SQSEvent, bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		out, err := r.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &r.deferredURL, MaxNumberOfMessages: 10,
			WaitTimeSeconds: min(int32(time.Until(deadline)/time.Second)+1, 20), MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			continue
		}
		var ev events.SQSEvent
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
				Body: aws.ToString(m.Body), EventSourceARN: "arn:aws:sqs:local:0:" + r.h.deferredQueue, Attributes: m.Attributes})
		}
		return ev, true
	}
	return events.SQSEvent{}, false
}

// mark writes a MARK line into the path trace, if one is being taken.
func mark(t *testing.T, what string) {
	path := os.Getenv("FLEETBUCKET_PATHTRACE")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "MARK %s\n", what); err != nil {
		t.Fatal(err)
	}
}
