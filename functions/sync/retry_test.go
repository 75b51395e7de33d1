package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/emf"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/fallback"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// outageDB is a real emulator client that answers every call with
// DynamoDB's InternalServerError while down is set: a store outage.
type outageDB struct {
	*dynamodb.Client
	down *atomic.Bool
}

func (o outageDB) fail(op string) error {
	return &dbtypes.InternalServerError{Message: aws.String("injected outage (" + op + ")")}
}

func (o outageDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, f ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if o.down.Load() {
		return nil, o.fail("UpdateItem")
	}
	return o.Client.UpdateItem(ctx, in, f...)
}

func (o outageDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, f ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if o.down.Load() {
		return nil, o.fail("GetItem")
	}
	return o.Client.GetItem(ctx, in, f...)
}

func (o outageDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, f ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if o.down.Load() {
		return nil, o.fail("BatchGetItem")
	}
	return o.Client.BatchGetItem(ctx, in, f...)
}

func (o outageDB) Query(ctx context.Context, in *dynamodb.QueryInput, f ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if o.down.Load() {
		return nil, o.fail("Query")
	}
	return o.Client.Query(ctx, in, f...)
}

func (o outageDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, f ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if o.down.Load() {
		return nil, o.fail("TransactWriteItems")
	}
	return o.Client.TransactWriteItems(ctx, in, f...)
}

// retryRig is the function's handler on the local stack: a changes queue
// with the stack's long visibility timeout, a deferred queue, a DLQ, the
// limiter and state tables behind outageDB.
type retryRig struct {
	sqs                                 *sqs.Client
	changesURL, changesARN, deferredURL string
	down                                atomic.Bool
	h                                   *handler
	state                               *ari.Store
}

func newRetryRig(t *testing.T) *retryRig { return newRig(t, "https://ota.invalid") }

// newRig is retryRig with its channel's vendor at baseURL (a local mock
// may speak plain http).
func newRig(t *testing.T, baseURL string) *retryRig {
	t.Helper()
	ctx := context.Background()
	r := &retryRig{sqs: emulator.SQS(t)}
	newQueue := func(name string) (string, string) {
		qname := fmt.Sprintf("%s-%08x", name, rand.Uint32())
		out, err := r.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &qname,
			Attributes: map[string]string{"VisibilityTimeout": "360"}}) // the stack's: 6 × 60 s
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = r.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		attrs, err := r.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		return *out.QueueUrl, attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	}
	r.changesURL, r.changesARN = newQueue("changes")
	var deferredARN string
	r.deferredURL, deferredARN = newQueue("deferred")
	dlqURL, _ := newQueue("dlq")

	real := emulator.DynamoDB(t)
	limits := emulator.NewTable(t, real)
	stateTable := "state-" + limits
	if err := ari.CreateTable(ctx, real, stateTable); err != nil {
		t.Fatal(err)
	}
	db := outageDB{Client: real, down: &r.down}
	cfg, err := config.Parse([]byte(`{"channels": {"bk": {"base_url": "` + baseURL + `", "allow_http": ` + strconv.FormatBool(strings.HasPrefix(baseURL, "http:")) + `, "credentials": {"c1": {"token_env": "BK_TOKEN"}},
		"endpoints": {"rates": {"path": "/rates", "limit": {"rate": 5, "burst": 5}}}}},
		"properties": {"hotel-1": [{"channel": "bk", "credential": "c1", "hotel_ref": "H1"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(db, limiter.WithTable(limits), limiter.WithCircuitBreaker(3, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	pusher, err := otapush.New(&http.Client{Timeout: time.Second}, lim, otapush.DefaultPolicy, otapush.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	r.state = &ari.Store{DB: db, Table: stateTable}
	sy := &syncer.Syncer{Config: cfg, State: r.state, Lanes: &lane.Store{DB: db, Table: stateTable},
		Token: func(string) string { return "tok" }}
	d := &dispatch.Dispatcher{Limiter: lim, Pusher: pusher, Policy: dispatch.DefaultPolicy, Log: quiet,
		Queue: &queue.Queue{SQS: r.sqs, DeferredURL: r.deferredURL, DeadURL: dlqURL}, LocalShare: fallback.New(2), Needs: sy.Needs()}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	sy.Dispatcher = d
	r.h = &handler{syncer: sy, deferredQueue: queueName(deferredARN), log: quiet, metrics: &emf.Counters{},
		namespace: "test", out: io.Discard, queues: newChangeQueues(r.sqs)}
	return r
}

// receive long-polls the changes queue until a message arrives or within
// passes, and returns it as the event source would hand it to the function.
func (r *retryRig) receive(t *testing.T, within time.Duration) (events.SQSEvent, bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		wait := min(int32(time.Until(deadline)/time.Second)+1, 20)
		out, err := r.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &r.changesURL, MaxNumberOfMessages: 10,
			WaitTimeSeconds: wait, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			continue
		}
		var ev events.SQSEvent
		for _, m := range out.Messages {
			rec := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
				EventSourceARN: r.changesARN, Attributes: m.Attributes, MessageAttributes: map[string]events.SQSMessageAttribute{}}
			for k, v := range m.MessageAttributes {
				rec.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
			}
			ev.Records = append(ev.Records, rec)
		}
		return ev, true
	}
	return events.SQSEvent{}, false
}

// handle invokes the function with ev and deletes what it did not report
// as failed, as an event source mapping with ReportBatchItemFailures does.
func (r *retryRig) handle(t *testing.T, ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	resp, err := r.h.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, rec := range ev.Records {
		if !failed[rec.MessageId] {
			if _, err := r.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &r.changesURL, ReceiptHandle: aws.String(rec.ReceiptHandle)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return resp
}

// A change whose state write failed because DynamoDB was out comes back
// after the short backoff (syncer.RetryBase, the breaker's cooldown), not
// after the changes queue's visibility timeout (6 minutes): its copy
// carries its attempt, and once the store is back it is applied.
func TestChangeRetriedAfterStoreOutage(t *testing.T) {
	r := newRetryRig(t)
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
	r.down.Store(true)
	r.handle(t, ev)
	r.down.Store(false)

	// Within the backoff and a margin for the emulator's late delivery,
	// well short of the visibility timeout.
	within := syncer.RetryDelay(1) + 10*time.Second
	again, ok := r.receive(t, within)
	if !ok {
		t.Fatalf("the change failed during the outage did not come back within %v: it waits out the changes queue's visibility timeout (360 s)", within)
	}
	rec := again.Records[0]
	if got := aws.ToString(rec.MessageAttributes[syncer.RetryAttribute].StringValue); got != "1" || rec.Body != body {
		t.Fatalf("came back: attempt %q, body %s; want attempt 1 and the same change", got, rec.Body)
	}
	if resp := r.handle(t, again); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the change failed again with the store back: %+v", resp.BatchItemFailures)
	}
	days, err := r.state.Read(ctx, []ari.Range{{Cell: "hotel-1#rates#DBL#BAR", From: "2027-01-05", To: "2027-01-06"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(days["hotel-1#rates#DBL#BAR"]); n != 2 {
		t.Errorf("state holds %d of the change's 2 days after the retry: %v", n, days)
	}
}

// RetryDelay starts at the breaker's cooldown and doubles up to RetryMax.
func TestRetryDelay(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 4: time.Minute, 30: time.Minute} {
		if got := syncer.RetryDelay(n); got != want {
			t.Errorf("RetryDelay(%d) = %v, want %v", n, got, want)
		}
	}
}
