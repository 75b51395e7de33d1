package emulator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
)

type lines []string

func (l *lines) Logf(c logging.Classification, format string, v ...any) {
	*l = append(*l, string(c)+" "+fmt.Sprintf(format, v...))
}

func TestQuietCancelled(t *testing.T) {
	const discard = "failed to discard remaining HTTP response body, this may affect connection reuse: %v"
	const closeBody = "failed to close HTTP response body, this may affect connection reuse: %v"
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		class  logging.Classification
		format string
		shown  bool
	}{
		{"discard warning of a cancelled call", cancelled, logging.Warn, discard, false},
		{"close warning of a cancelled call", cancelled, logging.Warn, closeBody, false},
		{"discard warning of a live call", context.Background(), logging.Warn, discard, true},
		{"other warning of a cancelled call", cancelled, logging.Warn, "response has no checksum: %v", true},
		{"debug line of a cancelled call", cancelled, logging.Debug, discard, true},
		// The SDK can log the drain without the operation's context: the
		// error itself shows the connection was closed under the call.
		{"discard warning of a closed connection, context unknown", nil, logging.Warn, discard, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got lines
			// As the SDK does it: the logger goes on the operation's
			// context, and the close middleware gets it back from there.
			closed := "read tcp 127.0.0.1:1->127.0.0.1:2: use of closed network connection"
			if tt.ctx == nil {
				QuietCancelled(&got).Logf(tt.class, tt.format, errors.New(closed))
			} else {
				ctx := middleware.SetLogger(tt.ctx, QuietCancelled(&got))
				middleware.GetLogger(ctx).Logf(tt.class, tt.format, closed)
			}
			if shown := len(got) == 1; shown != tt.shown {
				t.Fatalf("logged %q, want shown=%v", got, tt.shown)
			}
			if tt.shown && !strings.Contains(got[0], "127.0.0.1") {
				t.Fatalf("logged %q without its arguments", got)
			}
		})
	}
}

type syncLines struct {
	mu sync.Mutex
	l  lines
}

func (s *syncLines) Logf(c logging.Classification, format string, v ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.l.Logf(c, format, v...)
}

// On the emulators: calls cancelled at random points, some of them while
// their response body is being read (what a demo's end does to its pollers
// and workers), log no warning through the local clients' logger.
func TestCancelledCallsDoNotWarn(t *testing.T) {
	cfg := Config(t)
	var got syncLines
	cfg.Logger = QuietCancelled(&got)
	q, db := sqs.NewFromConfig(cfg), dynamodb.NewFromConfig(cfg, ForEmulator)
	ctx := context.Background()
	url := NewQueue(t, q, "quiet")
	table := NewTable(t, db)
	body := strings.Repeat("x", 20_000) // big answers: more time spent reading bodies
	for range 20 {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var cutShort atomic.Int32
	for w := range 8 {
		wg.Go(func() {
			for range 30 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(150_000))*time.Microsecond)
				var err error
				if w%2 == 0 {
					_, err = q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, VisibilityTimeout: 0})
				} else {
					_, err = db.Scan(ctx, &dynamodb.ScanInput{TableName: &table})
				}
				cancel()
				if err != nil && strings.Contains(err.Error(), "StatusCode: 200") {
					cutShort.Add(1) // cancelled after the headers
				}
			}
		})
	}
	wg.Wait()
	got.mu.Lock()
	defer got.mu.Unlock()
	for _, l := range got.l {
		if strings.Contains(l, "HTTP response body") {
			t.Errorf("logged: %s", l)
		}
	}
	t.Logf("%d calls cut short while reading their answer; %d log lines", cutShort.Load(), len(got.l))
}
