package limiter

import (
	"context"
	"testing"
	"time"
)

// A slot booked ahead at 2/s, before a throttle halved the rate to 1/s, is
// revoked even when the rate has climbed back to 2/s by the slot: grants
// made at 1/s meanwhile counted it at half its worth and lie beside it.
func TestConfirmRevokesASlotAHalvingSlowedOnceTheRateClimbsBack(t *testing.T) {
	t0 := time.UnixMicro(1_000_000_000_000)
	b := Bucket{Key: "k", Limit: PerSecond(2, 10), Adaptive: &Adaptive{MinRate: 0.5, Quiet: 5 * time.Second, Increase: 1}}
	halved := item(t0.UnixMicro()+20_000_000, "")
	halved[baseAttribute], halved[sinceAttribute], halved[versionAttribute] = num(1_000_000), num(t0.UnixMicro()), num(1)
	for _, tt := range []struct {
		name  string
		after time.Duration
	}{
		{"at the halved rate", 2 * time.Second},
		{"climbing, still below the slot's rate", 5500 * time.Millisecond},
		{"climbed back to the slot's rate", 6 * time.Second},
		{"past it", 30 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := t0.Add(tt.after)
			s := &readable{scripted: &scripted{unreachable: unreachable{t}}, item: halved}
			l, err := New(s, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			ok, err := l.Confirm(context.Background(), b, Stamp{Version: 0, Interval: 500_000})
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				iv := b.Adaptive.Interval(AdaptState{Base: 1_000_000, Since: t0.UnixMicro(), Version: 1}, b.Limit, now.UnixMicro())
				t.Fatalf("Confirm at t0+%v (the rate's interval %d µs) let stand a slot granted at 500000 µs before the halving to 1/s at t0", tt.after, iv)
			}
		})
	}
}
