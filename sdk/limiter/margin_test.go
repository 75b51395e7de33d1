package limiter

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The margin reaches the store's condition: a bucket of rate 20/s, burst 40
// and margin 100ms holds 38 tokens, so the write that books the 38th is
// bounded by a tat of now + 1.85s (τ 1.9s − one interval), and the 39th is
// denied with the exact wait of one interval, from this process's cache,
// with no write.
func TestMarginBoundsTheWrite(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := now.UnixMicro()
	b := Bucket{Key: "k", Limit: Limit{Rate: 20, Burst: 40, Margin: 100 * time.Millisecond}}
	s := &scripted{unreachable: unreachable{t}, steps: []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){
		failWith(item(at+1_850_000, "")), // 37 tokens booked by others
		granted(at + 1_900_000),
	}}
	l, err := New(s, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Take(context.Background(), b, 1)
	if err != nil {
		t.Fatalf("Take of the 38th token: %v", err)
	}
	if got, want := value(s.sent[1], ":limit"), strconv.FormatInt(at+1_850_000, 10); got != want {
		t.Errorf("busy write :limit = %s, want %s (now + τ − T with τ = 40·50ms − 100ms)", got, want)
	}
	if r.Remaining != 0 || !r.Slot.Equal(now) {
		t.Errorf("grant %+v, want slot now with 0 remaining", r)
	}
	_, err = l.Take(context.Background(), b, 1)
	if wait, ok := RetryAfter(err); !ok || wait != 50*time.Millisecond {
		t.Fatalf("39th Take = %v, want a denial with RetryAfter 50ms (the margin keeps 2 tokens)", err)
	}
	if len(s.sent) != 2 {
		t.Errorf("%d writes, want 2: the denial is answered from the booked horizon", len(s.sent))
	}
}

func TestSplitLimitKeepsTheMargin(t *testing.T) {
	shards, err := SplitLimit(Limit{Rate: 20, Burst: 40, Margin: 100 * time.Millisecond}, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range shards {
		// Each shard's requests reach the vendor with the same jitter: each
		// keeps the whole margin, rate/4 · 100ms of its own burst.
		if s.Margin != 100*time.Millisecond || s.Capacity() != 9 {
			t.Errorf("shard %d = %+v (capacity %d), want margin 100ms, capacity 9 of burst 10", i, s, s.Capacity())
		}
	}
}
