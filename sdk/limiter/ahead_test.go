package limiter

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// ReserveAhead's write claims now + ahead (at most maxDelay), so that its
// slot lies that far ahead: a slow store's answer then comes before it.
// ReserveBatch does the same with BatchRequest.Ahead.
func TestReserveAheadClaimsALaterNow(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := now.UnixMicro()
	b := Bucket{Key: "k", Limit: Limit{Rate: 20, Burst: 40}}
	const T = 50_000 // µs
	tests := []struct {
		name            string
		ahead, maxDelay time.Duration
		batch           bool
		claimed         int64 // µs after now
	}{
		{"ahead", 400 * time.Millisecond, time.Minute, false, 400_000},
		{"none", 0, time.Minute, false, 0},
		{"capped by maxDelay", 2 * time.Second, time.Second, false, 1_000_000},
		{"batch ahead", 400 * time.Millisecond, time.Minute, true, 400_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{unreachable: unreachable{t}, steps: []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){
				granted(at + tt.claimed + T),
			}}
			l, err := New(s, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			var slot time.Time
			if tt.batch {
				bt, err := l.ReserveBatch(context.Background(), b, BatchRequest{N: 1, MaxDelay: tt.maxDelay, Partial: true, Ahead: tt.ahead})
				if err != nil || len(bt.Slots) != 1 {
					t.Fatalf("ReserveBatch = %+v, %v; want one slot", bt, err)
				}
				slot = bt.Slots[0]
			} else {
				r, err := l.ReserveAhead(context.Background(), b, 1, tt.maxDelay, tt.ahead)
				if err != nil {
					t.Fatalf("ReserveAhead: %v", err)
				}
				slot = r.Slot
			}
			if got, want := value(s.sent[0], ":now"), strconv.FormatInt(at+tt.claimed, 10); got != want {
				t.Errorf("write :now = %s, want %s", got, want)
			}
			if want := now.Add(time.Duration(tt.claimed) * time.Microsecond); !slot.Equal(want) {
				t.Errorf("slot %v, want %v", slot, want)
			}
		})
	}
}
