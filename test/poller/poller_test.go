package poller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// A batch gathers up to BatchSize (past SQS's 10 per receive) within its
// Window, as an event source mapping with a batching window does; without
// a window it is one receive.
func TestGatherBatches(t *testing.T) {
	client := emulator.SQS(t)
	tests := []struct {
		name   string
		sent   int
		size   int32
		window time.Duration
		want   []int // batch sizes, in order
	}{
		{"one receive without a window", 12, 100, 0, []int{10, 2}},
		// The window is long, so each batch ends by filling up.
		{"gathers past 10 until full", 40, 20, time.Minute, []int{20, 20}},
		{"default size is 10", 20, 0, time.Minute, []int{10, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			url := emulator.NewQueue(t, client, "poller")
			for i := range tt.sent {
				if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(fmt.Sprint(i))}); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			var got []int
			seen := map[string]bool{}
			p := &Poller{SQS: client, QueueURL: url, BatchSize: tt.size, Window: tt.window, ShortPoll: 10 * time.Millisecond,
				Visibility: time.Minute,
				Handler: func(_ context.Context, msgs []types.Message) ([]string, error) {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, len(msgs))
					for _, m := range msgs {
						seen[aws.ToString(m.Body)] = true
					}
					return nil, nil
				}}
			for range tt.want {
				if err := p.Once(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// moto's threaded SQS can hand a message out twice (see unique):
			// a batch may then hold a copy, and the message it displaced is
			// still queued. The first batch's size is what the window
			// decides; every message was delivered at least once, by the
			// poller or, for a displaced one, to a plain receive after it.
			dups := 0
			for _, n := range got {
				dups += n
			}
			dups -= len(seen)
			for tries := 0; len(seen) < tt.sent && tries < 10; tries++ {
				out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range out.Messages {
					seen[aws.ToString(m.Body)] = true
				}
			}
			if len(got) != len(tt.want) || got[0] != tt.want[0] || len(seen) != tt.sent {
				t.Errorf("batches %v (%d copies) then %d distinct messages in all, want %v and %d", got, dups, len(seen), tt.want, tt.sent)
			}
			if dups > 0 {
				t.Logf("the emulator delivered %d message(s) twice", dups)
			}
		})
	}
}
