package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// A slot Wait booked ahead at an adaptive rate that another worker's
// throttle halved before it came is not spent: grants at the halved rate
// fit in among it. Wait's silence check reads the item (its last answer
// is older than SilenceAfter), finds the halving, and books again.
func TestWaitBooksAgainASlotAHalvingSlowed(t *testing.T) {
	t0 := time.UnixMicro(1_000_000_000_000)
	now := t0
	b := Bucket{Key: "k", Limit: PerSecond(10, 2), Adaptive: &Adaptive{MinRate: 1, Quiet: time.Hour, Increase: 1}}
	halved := item(t0.UnixMicro()+900_000, "")
	halved[baseAttribute], halved[sinceAttribute], halved[versionAttribute] = num(200_000), num(t0.UnixMicro()), num(1)
	s := &readable{scripted: &scripted{unreachable: unreachable{t}}, item: halved}
	s.steps = append(s.steps,
		func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			now = t0.Add(120 * time.Millisecond) // the answer comes after the halving
			return &dynamodb.UpdateItemOutput{Attributes: item(t0.UnixMicro()+150_000+200_000, "")}, nil
		},
		granted(t0.UnixMicro()+120_000+400_000),
	)
	l, err := New(s, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Wait(context.Background(), b, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(120 * time.Millisecond); len(s.sent) != 2 || !r.Slot.Equal(want) {
		t.Fatalf("Wait spent slot t0+%v after %d writes, %d reads; want the slot booked at 10/s revoked and t0+%v booked at 5/s", r.Slot.Sub(t0), len(s.sent), s.reads, want.Sub(t0))
	}
}
