package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Confirm judges a slot against the adaptive state the store holds, which
// keeps only the last change. A slot granted more than one change ago
// cannot be judged from it: a change between may have lowered the rate
// below the slot's, which revokes it for good (see stands), and a later
// one on the climbed-back rate may have left an interval the slot's own
// fits. Each row's states are the ones gcra.Adaptive makes.
func TestConfirmJudgesASlotOnlyOneChangeOld(t *testing.T) {
	t0 := time.UnixMicro(1_000_000_000_000).UnixMicro()
	const sec = int64(1_000_000)
	b := Bucket{Key: "k", Limit: PerSecond(2, 10), Adaptive: &Adaptive{MinRate: 0.5, Quiet: 5 * time.Second, Increase: 1}}
	v0 := AdaptState{Base: sec, Since: t0 - sec}
	// A throttle at t0+1s halves 1/s to 0.5/s; the rate climbs back to
	// 2/s from t0+6s, and a throttle at t0+8s returns it to half that,
	// 1/s: the slot's rate again.
	v1 := b.Adaptive.Throttled(v0, b.Limit, t0+sec, 0)
	v2 := b.Adaptive.Throttled(v1, b.Limit, t0+8*sec, 0)
	if v1.Base != 2*sec || v2.Base != sec || v2.Version != 2 {
		t.Fatalf("the states are not the ones the rows name: %+v, %+v", v1, v2)
	}
	for _, tt := range []struct {
		name  string
		st    AdaptState
		stamp Stamp
		want  bool
	}{
		{"no change since the grant", v0, Stamp{Version: 0, Interval: sec}, true},
		{"one change, the halving below the slot's rate", v1, Stamp{Version: 0, Interval: sec}, false},
		// Granted at 1/s during v1's climb: v2 left the slot's rate.
		{"one change, a throttle back to the slot's rate", v2, Stamp{Version: 1, Interval: sec}, true},
		// Granted at 1/s before the halving: v1 revoked it, and v2 alone
		// does not say so.
		{"two changes, the first a halving below the slot's rate", v2, Stamp{Version: 0, Interval: sec}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := time.UnixMicro(t0 + 9*sec)
			it := item(now.UnixMicro()+10*sec, "")
			it[baseAttribute], it[sinceAttribute], it[versionAttribute] = num(tt.st.Base), num(tt.st.Since), num(tt.st.Version)
			it[probesAttribute] = num(tt.st.Probes)
			for _, seen := range []bool{false, true} {
				s := &readable{scripted: &scripted{unreachable: unreachable{t}}, item: it}
				l, err := New(s, WithClock(func() time.Time { return now }))
				if err != nil {
					t.Fatal(err)
				}
				if seen {
					// The process heard the state already (a grant's or
					// a read's answer): judged without a read, or read.
					l.adapt.set(b.Key, tt.st)
				}
				ok, err := l.Confirm(context.Background(), b, tt.stamp)
				if err != nil {
					t.Fatal(err)
				}
				if ok != tt.want {
					t.Errorf("seen %v: Confirm of a slot granted at version %d (%d µs) against version %d (base %d µs since t0%+ds) = %v, want %v",
						seen, tt.stamp.Version, tt.stamp.Interval, tt.st.Version, tt.st.Base, (tt.st.Since-t0)/sec, ok, tt.want)
				}
			}
		})
	}
}

// Wait judges a slot it booked ahead against the state its silence check
// read, and books again when that state is more than one change past the
// grant's: booked at 5/s, halved to 2.5/s, climbed back to 10/s and
// throttled to 5/s by the slot, which the last change alone would let
// stand.
func TestWaitBooksAgainASlotTwoChangesOld(t *testing.T) {
	t0 := time.UnixMicro(1_000_000_000_000)
	now := t0
	const ms = int64(1000)
	b := Bucket{Key: "k", Limit: PerSecond(10, 2), Adaptive: &Adaptive{MinRate: 1, Quiet: time.Second, Increase: 10}}
	v0 := AdaptState{Base: 200 * ms, Since: t0.UnixMicro() - 500*ms}
	v1 := b.Adaptive.Throttled(v0, b.Limit, t0.UnixMicro()+100*ms, 0)
	v2 := b.Adaptive.Throttled(v1, b.Limit, t0.UnixMicro()+2000*ms, 0)
	if v1.Base != 400*ms || v2.Base != 200*ms || v2.Version != 2 {
		t.Fatalf("the states are not the ones the test names: %+v, %+v", v1, v2)
	}
	changed := item(t0.UnixMicro()+3400*ms, "")
	changed[baseAttribute], changed[sinceAttribute], changed[versionAttribute], changed[probesAttribute] = num(v2.Base), num(v2.Since), num(v2.Version), num(v2.Probes)
	slot := t0.Add(3 * time.Second)
	s := &readable{scripted: &scripted{unreachable: unreachable{t}}, item: changed}
	s.steps = append(s.steps,
		func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			// Booked 3 s ahead at 5/s (tolerance 2 × 200 ms); the
			// answer comes just before the silence check.
			now = slot.Add(-SilenceAfter)
			return &dynamodb.UpdateItemOutput{Attributes: item(slot.UnixMicro()+400*ms, "")}, nil
		},
		granted(slot.UnixMicro()),
	)
	l, err := New(s, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	l.adapt.set(b.Key, v0)
	r, err := l.Wait(context.Background(), b, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.sent) != 2 || r.Slot.Equal(slot) {
		t.Fatalf("Wait spent slot t0+%v after %d writes, %d reads; want the slot booked at 5/s before the halving (version 0) booked again against version 2", r.Slot.Sub(t0), len(s.sent), s.reads)
	}
}
