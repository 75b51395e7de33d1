package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/cmd/fleetbucket/dlq"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// newQueue creates a queue unique to the test, deleted when it ends.
func newQueue(t *testing.T, client *sqs.Client, name string) string {
	t.Helper()
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("cli-%s-%08x", name, rand.Uint32()))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	return *out.QueueUrl
}

func send(t *testing.T, client *sqs.Client, url, body, reason string) {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body}
	if reason != "" {
		in.MessageAttributes = map[string]types.MessageAttributeValue{queue.ReasonAttribute: {DataType: aws.String("String"), StringValue: &reason}}
	}
	// A send whose answer the emulator dropped may have landed, and the
	// SDK's own retry would then queue a second copy (SQS is at least once),
	// which this test's exact counts cannot tell from a bug. So the SDK does
	// not retry; a failed send is sent again only if the queue did not grow.
	before := queued(t, client, url)
	for attempt := 0; ; attempt++ {
		_, err := client.SendMessage(context.Background(), in, func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
		if err == nil || queued(t, client, url) > before {
			return
		}
		if attempt == 2 {
			t.Fatal(err)
		}
	}
}

// queued is the number of messages on url, visible or not.
func queued(t *testing.T, client *sqs.Client, url string) int {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n
}

// drain receives every message of a queue (deleting them) and returns the
// bodies, sorted.
func drain(t *testing.T, client *sqs.Client, url string) []string {
	t.Helper()
	var bodies []string
	for {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			sort.Strings(bodies)
			return bodies
		}
		for _, m := range out.Messages {
			bodies = append(bodies, *m.Body)
			_, _ = client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// The dead-lettered messages of the DLQ's producers.
var (
	changeBody  = `{"id":"e-1","source":"pms","detail-type":"ari-change","time":"2026-12-01T10:00:00Z","detail":{"event_id":"ev-1","property_id":"h1","sequence":3,"kind":"rates","room_type":"std","from":"2027-01-05","to":"2027-01-05","values":{"amount":"99"}}}`
	jobBody     = `{"v":1,"id":"ev-1#bk#rates","channel":"bk","credential":"c1","endpoint":"rates","first_seen":"2026-12-01T10:00:00Z","deferrals":25}`
	movedJob    = `{"v":1,"id":"ev-2#bk#rates","channel":"bk","credential":"c1","endpoint":"rates","first_seen":"2026-12-01T10:00:00Z","deferrals":1}`
	refusedPush = `<OTA_HotelRateAmountNotifRQ/>`
)

type dlqCase struct {
	body, reason string
	kind         dlq.Kind
}

var dlqMessages = []dlqCase{
	{changeBody, "invalid PMS change event \"ev-1\": date range 2027-01-05..2027-03-05 spans 60 days, more than the 31 allowed", dlq.Change},
	{jobBody, "job ev-1#bk#rates: expired: 25 deferrals, at most 24", dlq.Job},
	{movedJob, "", dlq.Job},
	{refusedPush, "job ev-3#bk#rates: vendor refused: 400 bad rate plan", dlq.Unknown},
}

type listOut struct {
	Messages []dlq.Message `json:"messages"`
}

type redriveOut struct {
	DryRun bool       `json:"dry_run"`
	Moves  []dlq.Move `json:"moves"`
}

func TestDLQListAndRedrive(t *testing.T) {
	client := emulator.SQS(t)
	dead, changes, deferred := newQueue(t, client, "dlq"), newQueue(t, client, "changes"), newQueue(t, client, "deferred")
	for _, m := range dlqMessages {
		send(t, client, dead, m.body, m.reason)
	}
	c := newCLI(t, map[string]string{"FLEETBUCKET_DLQ_URL": dead})

	// list shows every message with its kind and reason, and removes none:
	// a second list sees them all again at once.
	for range 2 {
		out := decode[listOut](t, c.run("dlq", "list", "--json").must(t))
		got := map[string]dlq.Message{}
		for _, m := range out.Messages {
			got[m.Body] = m
		}
		if len(out.Messages) != len(dlqMessages) {
			t.Fatalf("listed %d messages, want %d: %+v", len(out.Messages), len(dlqMessages), out.Messages)
		}
		for _, w := range dlqMessages {
			if m := got[w.body]; m.Kind != w.kind || m.Reason != w.reason || m.Receives < 1 || m.Sent.IsZero() {
				t.Errorf("message %.30s = %+v, want kind %s, reason %q", w.body, m, w.kind, w.reason)
			}
		}
	}
	if out := decode[listOut](t, c.run("dlq", "list", "--max", "2", "--json").must(t)); len(out.Messages) != 2 {
		t.Errorf("--max 2 listed %d", len(out.Messages))
	}
	text := listAll(t, c, 4)
	for _, w := range []string{"4 message(s) in the dead-letter queue (left in place)", "reason: (none: moved by the queue's redrive policy", "reason: job ev-1#bk#rates: expired", "  body:   {\"v\":1,\"id\":\"ev-1#bk#rates\""} {
		if !strings.Contains(text, w) {
			t.Errorf("list text lacks %q:\n%s", w, text)
		}
	}

	// A dry run says what would move and moves nothing.
	r := c.run("dlq", "redrive", "--dry-run", "--changes-queue-url", changes, "--deferred-queue-url", deferred)
	if !strings.Contains(r.must(t), "dry run: 3 message(s) would move, 1 would stay") || strings.Count(r.stderr, "would move") != 3 || !strings.Contains(r.stderr, "kept unknown") {
		t.Errorf("dry run:\n%s%s", r.stdout, r.stderr)
	}
	if text := listAll(t, c, 4); !strings.Contains(text, "4 message(s)") {
		t.Fatalf("after a dry run the DLQ lists:\n%s\nwant 4 messages", text)
	}

	// Without a deferred queue, jobs stay and say why.
	r = c.run("dlq", "redrive", "--changes-queue-url", changes, "--json")
	out := decode[redriveOut](t, r.must(t))
	if len(out.Moves) != 4 || !strings.Contains(r.stderr, "no deferred queue URL given") || !strings.Contains(r.stderr, "moved change") {
		t.Errorf("redrive to changes only: %+v\n%s", out, r.stderr)
	}
	if got := drain(t, client, changes); len(got) != 1 || got[0] != changeBody {
		t.Errorf("changes queue holds %q, want the change event", got)
	}

	// Then the jobs, each logged with its reason.
	r = c.run("dlq", "redrive", "--deferred-queue-url", deferred)
	if !strings.Contains(r.must(t), "2 message(s) moved back, 1 left in the dead-letter queue") ||
		!strings.Contains(r.stderr, "reason: job ev-1#bk#rates: expired") || !strings.Contains(r.stderr, "reason: (none: moved by the queue's redrive policy") {
		t.Errorf("redrive:\n%s%s", r.stdout, r.stderr)
	}
	// Back on the deferred queue, each job starts its life over
	// (job.Restarted): the expired one would otherwise expire again.
	got := drain(t, client, deferred)
	if len(got) != 2 {
		t.Fatalf("deferred queue holds %q, want the two jobs", got)
	}
	for i, want := range []string{"ev-1#bk#rates", "ev-2#bk#rates"} {
		j, err := job.Decode(got[i])
		if err != nil || j.ID != want || j.Deferrals != 0 || time.Since(j.FirstSeen) > time.Minute {
			t.Errorf("redriven job %d: %+v (%v), want %s restarted: no deferrals, first seen now", i, j, err, want)
		}
	}
	if got := drain(t, client, dead); len(got) != 1 || got[0] != refusedPush {
		t.Errorf("DLQ holds %q, want only the vendor-refused push", got)
	}
}

// listAll runs `dlq list` until it shows want messages, a few times: moto's
// SQS long poll can miss messages that were just made visible again (the
// previous list's release), which SQS itself does not. It returns the
// last output.
func listAll(t *testing.T, c *cli, want int) string {
	t.Helper()
	var text string
	for range 5 {
		text = c.run("dlq", "list").must(t)
		if strings.Contains(text, fmt.Sprintf("%d message(s) in the dead-letter queue", want)) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return text
}

func TestDLQMissingQueue(t *testing.T) {
	emulator.Config(t) // skips (or fails) without the local stack
	c := newCLI(t, map[string]string{"FLEETBUCKET_DLQ_URL": os.Getenv("AWS_ENDPOINT_URL_SQS") + "/123456789012/no-such-queue"})
	c.run("dlq", "list").fails(t, "does not exist: check the queue URL flags")
}
