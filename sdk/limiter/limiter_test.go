package limiter

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// unreachable is a client that fails the test if the limiter calls it: these
// tests are about what is refused before anything is sent.
type unreachable struct{ t *testing.T }

func (u unreachable) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	u.t.Fatal("UpdateItem called for a request that should have been refused")
	return nil, nil
}

func (u unreachable) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	u.t.Fatal("GetItem called for a request that should have been refused")
	return nil, nil
}

func TestBadInputIsRefusedNamingTheField(t *testing.T) {
	ok := PerSecond(10, 5)
	tests := []struct {
		name     string
		bucket   Bucket
		n        int
		maxDelay time.Duration
		field    string
		never    bool
	}{
		{"empty key", Bucket{Key: "", Limit: ok}, 1, 0, "bucket.key", false},
		{"key too long", Bucket{Key: strings.Repeat("k", 2049), Limit: ok}, 1, 0, "bucket.key", false},
		{"key not UTF-8", Bucket{Key: "cred\xff", Limit: ok}, 1, 0, "bucket.key", false},
		{"zero rate", Bucket{Key: "k", Limit: Limit{Rate: 0, Burst: 1}}, 1, 0, "limit.rate", false},
		{"negative rate", Bucket{Key: "k", Limit: Limit{Rate: -3, Burst: 1}}, 1, 0, "limit.rate", false},
		{"NaN rate", Bucket{Key: "k", Limit: Limit{Rate: math.NaN(), Burst: 1}}, 1, 0, "limit.rate", false},
		{"Inf rate", Bucket{Key: "k", Limit: Limit{Rate: math.Inf(1), Burst: 1}}, 1, 0, "limit.rate", false},
		{"zero burst", Bucket{Key: "k", Limit: Limit{Rate: 1, Burst: 0}}, 1, 0, "limit.burst", false},
		{"zero n", Bucket{Key: "k", Limit: ok}, 0, 0, "n", false},
		{"negative n", Bucket{Key: "k", Limit: ok}, -2, 0, "n", false},
		{"negative maxDelay", Bucket{Key: "k", Limit: ok}, 1, -time.Second, "maxDelay", false},
		{"n over burst", Bucket{Key: "k", Limit: ok}, 6, 0, "n", true},
		{"n over burst plus delay", Bucket{Key: "k", Limit: ok}, 8, 200 * time.Millisecond, "n", true},
	}
	l, err := New(unreachable{t})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.Reserve(context.Background(), tt.bucket, tt.n, tt.maxDelay)
			var ae *ArgumentError
			if !errors.As(err, &ae) || ae.Field != tt.field || !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Reserve = %v, want an ArgumentError on %s", err, tt.field)
			}
			if errors.Is(err, ErrNeverGrantable) != tt.never {
				t.Fatalf("Reserve = %v: ErrNeverGrantable is %v, want %v", err, !tt.never, tt.never)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("message %q does not name %s", err, tt.field)
			}
		})
	}
}

func TestPenalizeAndStateValidateToo(t *testing.T) {
	l, err := New(unreachable{t})
	if err != nil {
		t.Fatal(err)
	}
	bad := Bucket{Key: "", Limit: PerSecond(1, 1)}
	if err := l.Penalize(context.Background(), bad, time.Now()); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Penalize = %v, want ErrInvalidArgument", err)
	}
	if _, err := l.State(context.Background(), bad); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("State = %v, want ErrInvalidArgument", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name  string
		db    DynamoDBAPI
		opts  []Option
		field string
	}{
		{"nil client", nil, nil, "db"},
		{"short table name", unreachable{t}, []Option{WithTable("ab")}, "table"},
		{"bad table chars", unreachable{t}, []Option{WithTable("my table")}, "table"},
		{"zero attempts", unreachable{t}, []Option{WithMaxAttempts(0)}, "maxAttempts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.db, tt.opts...)
			var ae *ArgumentError
			if !errors.As(err, &ae) || ae.Field != tt.field {
				t.Fatalf("New = %v, want an ArgumentError on %s", err, tt.field)
			}
		})
	}
}

// A denial the process can prove from the tat it last saw costs no call.
func TestDenialCacheAnswersLocally(t *testing.T) {
	now := time.UnixMicro(1_000_000_000)
	l, err := New(unreachable{t}, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	b := Bucket{Key: "k", Limit: PerSecond(10, 2)}                // T = 100ms, τ = 200ms
	l.seen.observe("k", now.UnixMicro()+200_000, now.UnixMicro()) // the bucket was seen empty
	_, err = l.Take(context.Background(), b, 1)
	if wait, ok := RetryAfter(err); !ok || wait != 100*time.Millisecond {
		t.Fatalf("Take = %v, want a local denial with retry-after 100ms", err)
	}
	_, err = l.Reserve(context.Background(), b, 1, 50*time.Millisecond)
	if wait, ok := RetryAfter(err); !ok || wait != 50*time.Millisecond {
		t.Fatalf("Reserve = %v, want a local denial with retry-after 50ms", err)
	}
}

func TestWaitWithPassedDeadlineSendsNothing(t *testing.T) {
	l, err := New(unreachable{t})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := l.Wait(ctx, Bucket{Key: "k", Limit: PerSecond(1, 1)}, 1, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want DeadlineExceeded", err)
	}
}
