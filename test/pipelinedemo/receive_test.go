package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/test/poller"
)

// fakeQueue answers receives with n messages and records the visibility
// timeouts asked for.
type fakeQueue struct {
	mu        sync.Mutex
	n         int
	received  []int32          // each receive's VisibilityTimeout
	extended  map[string]int32 // receipt handle → visibility it was extended to
	extends   []int            // entries per ChangeMessageVisibilityBatch
	deletions int
}

func (f *fakeQueue) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.received = append(f.received, in.VisibilityTimeout)
	var out sqs.ReceiveMessageOutput
	for i := range min(f.n, int(in.MaxNumberOfMessages)) {
		id := fmt.Sprintf("m%d-%d", len(f.received), i)
		out.Messages = append(out.Messages, sqstypes.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String("{}")})
	}
	f.n -= len(out.Messages)
	return &out, nil
}

func (f *fakeQueue) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.extends = append(f.extends, len(in.Entries))
	for _, e := range in.Entries {
		f.extended[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

func (f *fakeQueue) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletions += len(in.Entries)
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// A demo poller receives with a visibility timeout of lostAnswerVisibility
// and extends it to its own for the messages that reached it: a receive
// whose answer is lost on the way (the emulator served it, the SDK sent it
// again) hides its messages for lostAnswerVisibility, not for the poller's
// minute, which made a change a minute late.
func TestDemoPollerHidesALostAnswerBriefly(t *testing.T) {
	q := &fakeQueue{n: 12, extended: map[string]int32{}}
	var handled []string
	p := &poller.Poller{SQS: pollerClient(q, nil, "changes", func(err error) { t.Error(err) }), QueueURL: "q",
		Visibility: time.Minute, BatchSize: 12, Window: time.Minute, ShortPoll: time.Millisecond, // the batch ends by filling up
		Handler: func(_ context.Context, msgs []sqstypes.Message) ([]string, error) {
			for _, m := range msgs {
				handled = append(handled, aws.ToString(m.ReceiptHandle))
			}
			return nil, nil
		}}
	if err := p.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, v := range q.received {
		if v != int32(lostAnswerVisibility/time.Second) {
			t.Errorf("receive %d asked for a visibility of %d s, want %v: a lost answer would hide its messages that long", i, v, lostAnswerVisibility)
		}
	}
	if len(handled) != 12 || q.deletions != 12 {
		t.Fatalf("handled %d messages and deleted %d, want 12 and 12", len(handled), q.deletions)
	}
	for _, rh := range handled {
		if v, ok := q.extended[rh]; !ok || v != 60 {
			t.Errorf("message %s handed to the handler with its visibility extended to %d s (extended: %v), want 60 s", rh, v, ok)
		}
	}
	for _, n := range q.extends {
		if n > 10 {
			t.Errorf("a ChangeMessageVisibilityBatch of %d entries; SQS takes at most 10", n)
		}
	}
}
