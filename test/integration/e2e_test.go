package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/poller"
)

// The deployable function end to end: the real bootstrap binary under
// aws-lambda-rie, fed by pollers playing the event source mappings of both
// queues, with PMS events on the changes queue and the mock OTA at the
// other end. Every event is pushed within the limit, bad ones are
// dead-lettered, and both queues end empty: nothing is lost.
func TestSyncFunctionEndToEnd(t *testing.T) {
	lim := limiter.PerSecond(5, 3)
	p := newPipeline(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow})
	stateTable := emulator.NewStateTable(t, emulator.DynamoDB(t))
	// The credential's token lives in Secrets Manager, as deployed: the
	// function reads it at first use, and nothing in its environment holds it.
	secret := emulator.NewSecret(t, emulator.SecretsManager(t), "tok")
	bootstrap := emulator.BuildFunction(t, "./functions/sync")
	config := filepath.Join(filepath.Dir(bootstrap), "connections.json")
	withSecret := strings.Replace(connectionsJSON(p.ota.URL(), lim), `{"token_env": "TEST_OTA_TOKEN"}`, fmt.Sprintf(`{"secret_id": %q}`, secret), 1)
	if !strings.Contains(withSecret, secret) {
		t.Fatal("the connections config names no secret")
	}
	if err := os.WriteFile(config, []byte(withSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	fn := emulator.StartLambda(t, bootstrap, []string{
		"FLEETBUCKET_TABLE=" + p.table, "FLEETBUCKET_STATE_TABLE=" + stateTable,
		"FLEETBUCKET_DEFERRED_QUEUE_URL=" + p.deferredURL, "FLEETBUCKET_DLQ_URL=" + p.dlqURL, "FLEETBUCKET_MAX_RECEIVE_COUNT=5",
		"FLEETBUCKET_CONNECTIONS=" + config, "TEST_OTA_TOKEN=", // no token in the environment
	})

	const events = 20
	var bodies []string
	for i := range events {
		kind := []string{"availability", "rates"}[i%2]
		date := time.Date(2026, 12, 1+i, 0, 0, 0, 0, time.UTC).Format(ari.DateLayout)
		bodies = append(bodies, changeEvent(fmt.Sprintf("ev-%02d", i), int64(i+1), kind, date, date, map[string]any{"v": i}))
	}
	bodies = append(bodies, `{"source":"pms","detail":{"event_id":"broken"`)
	p.enqueueBodies(bodies)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, url := range []string{p.changesURL, p.deferredURL} {
		pl := &poller.Poller{SQS: p.sqs, QueueURL: url, Visibility: 30 * time.Second, ShortPoll: 20 * time.Millisecond,
			Handler: invokeHandler(fn, url), OnError: func(err error) { t.Logf("poller: %v", err) }}
		wg.Go(func() { pl.Run(ctx) })
	}
	for ctx.Err() == nil && (len(p.ota.Accepted()) == 0 || p.depth(p.changesURL)+p.depth(p.deferredURL) > 0) {
		sleep(ctx, 200*time.Millisecond)
	}
	cancel()
	wg.Wait()

	ota := otaCopy(t, p)
	for i := range events {
		kind := []string{"availability", "rates"}[i%2]
		date := time.Date(2026, 12, 1+i, 0, 0, 0, 0, time.UTC).Format(ari.DateLayout)
		if h, ok := ota.Held(otaDay(kind, date)); !ok || h.Sequence != int64(i+1) {
			t.Errorf("event %d: the OTA holds %s %s as %+v, want sequence %d", i, kind, date, h, i+1)
		}
	}
	assertVendorKeptItsWindow(t, p.ota, "tok", "availability", "rates") // the mock OTA sees the secret's token
	if n := p.depth(p.changesURL) + p.depth(p.deferredURL); n != 0 {
		t.Errorf("%d messages still on the queues", n)
	}
	dlq := p.receiveDLQ()
	if len(dlq) != 1 || !strings.Contains(dlq[bodies[events]], "not JSON") {
		t.Errorf("DLQ = %v, want only the broken event, with its reason", dlq)
	}
	// The stack's schedule invokes the same binary to sweep: with every
	// lane delivered, none is stranded.
	out, err := fn.Invoke(context.Background(), []byte(`{"action":"`+syncer.SweepAction+`"}`))
	var swept struct {
		Items, Lanes int
		ErrorMessage string `json:"errorMessage"`
	}
	if err != nil || json.Unmarshal(out, &swept) != nil || swept.ErrorMessage != "" || swept.Items != 0 || swept.Lanes != 0 {
		t.Errorf("sweep invocation: %s, %v; want nothing stranded", out, err)
	}
	t.Logf("%d events pushed through the bootstrap binary in %d requests, with the token from Secrets Manager; 429s %d", events, len(p.ota.Accepted()), p.ota.Count429())
}

// invokeHandler turns a batch into the SQS event Lambda would send and
// returns the function's batch item failures.
func invokeHandler(fn *emulator.Lambda, queueURL string) poller.Handler {
	arn := "arn:aws:sqs:us-east-1:000000000000:" + queueURL[strings.LastIndex(queueURL, "/")+1:]
	return func(ctx context.Context, msgs []sqstypes.Message) ([]string, error) {
		var ev events.SQSEvent
		for _, m := range msgs {
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
				Body: aws.ToString(m.Body), EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: "us-east-1",
			})
		}
		payload, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		out, err := fn.Invoke(ctx, payload)
		if err != nil {
			return nil, err
		}
		var resp struct {
			events.SQSEventResponse
			ErrorMessage string `json:"errorMessage"`
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			return nil, fmt.Errorf("function answered %s: %w", out, err)
		}
		if resp.ErrorMessage != "" {
			return nil, fmt.Errorf("function failed: %s", resp.ErrorMessage)
		}
		var failed []string
		for _, f := range resp.BatchItemFailures {
			failed = append(failed, f.ItemIdentifier)
		}
		return failed, nil
	}
}

// enqueueBodies puts raw message bodies on the changes queue.
func (p *pipeline) enqueueBodies(bodies []string) {
	p.t.Helper()
	for _, b := range bodies {
		if _, err := p.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &p.changesURL, MessageBody: aws.String(b)}); err != nil {
			p.t.Fatal(err)
		}
	}
}

// depth counts a queue's messages: visible, in flight and delayed.
func (p *pipeline) depth(url string) int {
	out, err := p.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		p.t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		c, _ := strconv.Atoi(v)
		n += c
	}
	return n
}
