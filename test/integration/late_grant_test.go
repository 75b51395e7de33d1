package integration

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// slowAnswers is the emulator's client with the answer of each grant write
// delayed: after the write lands, it moves the test's clock on by the next
// of its latencies (the last one repeats), as a slow store would. It
// records the now each write claimed (":now"), which is the slot of a
// grant due at once.
type slowAnswers struct {
	*dynamodb.Client
	clock     *limitertest.Clock
	latencies []time.Duration
	mu        sync.Mutex
	claimed   []time.Time
}

func (s *slowAnswers) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := s.Client.UpdateItem(ctx, in, o...)
	if v, ok := in.ExpressionAttributeValues[":now"].(*types.AttributeValueMemberN); ok {
		us, _ := strconv.ParseInt(v.Value, 10, 64)
		s.mu.Lock()
		i := min(len(s.claimed), len(s.latencies)-1)
		s.claimed = append(s.claimed, time.UnixMicro(us))
		s.mu.Unlock()
		s.clock.Advance(s.latencies[i])
	}
	return out, err
}

func (s *slowAnswers) writes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.claimed...)
}

// TestLateGrantIsNeverSpent: a grant the store answers later than its
// slot plus the bucket's margin is never handed to the caller. Wait books
// again, a slot as far ahead of its write as the late grant came late, and
// after limiter.MaxLateGrants late grants in a row fails with a
// *LateGrantError matching ErrUnavailable. "Late" is the answer's time less
// the slot the grant names, not the write's latency: a slot booked ahead
// and answered before it comes is spent whatever the latency.
//
// The bucket is 20/s, burst 40, margin 100 ms (capacity 38). The slots are
// worked out by hand from t0 and the latencies, and the writes' claimed
// nows are read from the requests: no sdk/gcra in the oracle.
func TestLateGrantIsNeverSpent(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	tests := []struct {
		name string
		// ahead: tokens reserved at t0, with no latency, before the Wait;
		// each past the 38 of the capacity moves the next slot on by 50 ms.
		ahead     int
		latencies []time.Duration // of the Wait's writes
		// want: the slot spent, after t0, and the writes the Wait made.
		wantSlot   time.Duration
		wantWrites int
		wantErr    bool
	}{
		{name: "answered at its margin is spent", latencies: []time.Duration{100 * ms}, wantSlot: 0, wantWrites: 1},
		// Answered at t0 + 101 ms, 1 ms past its margin: the next write
		// claims 101 ms later than its own now, t0 + 202 ms, and is
		// answered before that slot.
		{name: "answered past its margin is booked again, that far ahead", latencies: []time.Duration{101 * ms, 0}, wantSlot: 202 * ms, wantWrites: 2},
		// t0 answered at 150 ms; t0+300 ms (150 ahead) answered at 450 ms,
		// 150 ms late; t0+600 ms (150 ahead) answered at 470 ms.
		{name: "twice past its margin, then before its slot", latencies: []time.Duration{150 * ms, 300 * ms, 20 * ms}, wantSlot: 600 * ms, wantWrites: 3},
		// A store ever slower: t0 answered at 150 ms, t0+300 ms at 550 ms,
		// t0+800 ms at 1350 ms.
		{name: "every answer past its margin fails closed", latencies: []time.Duration{150 * ms, 400 * ms, 800 * ms}, wantWrites: limiter.MaxLateGrants, wantErr: true},
		// 38 + 9 tokens booked: the Wait's slot is t0 + 500 ms.
		{name: "a slot ahead answered before it comes is spent", ahead: 47, latencies: []time.Duration{300 * ms}, wantSlot: 500 * ms, wantWrites: 1},
		// Answered at t0 + 650 ms, 150 ms after its slot: the next write
		// claims t0 + 800 ms, after the bucket's next slot (550 ms).
		{name: "a slot ahead answered past it and its margin is booked again", ahead: 47, latencies: []time.Duration{650 * ms, 0}, wantSlot: 800 * ms, wantWrites: 2},
	}
	db := emulator.DynamoDB(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table := emulator.NewTable(t, db)
			clock := newClock()
			t0 := clock.Now()
			margin := 100 * ms
			b := limiter.Bucket{Key: "late#" + t.Name(), Limit: limiter.Limit{Rate: 20, Burst: 40, Margin: margin}}
			store := &slowAnswers{Client: db, clock: clock, latencies: []time.Duration{0}}
			l, err := limiter.New(store, limiter.WithTable(table), limiter.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.ahead {
				if _, err := l.Reserve(t.Context(), b, 1, time.Second); err != nil {
					t.Fatalf("reservation %d ahead: %v", i, err)
				}
			}
			clock.Set(t0)
			store.mu.Lock()
			store.latencies = tc.latencies
			store.claimed = nil
			store.mu.Unlock()

			r, err := l.Wait(t.Context(), b, 1, 5*time.Second)
			spentAt := clock.Now()
			writes := store.writes()
			if len(writes) != tc.wantWrites {
				t.Errorf("the Wait made %d writes, want %d", len(writes), tc.wantWrites)
			}
			if tc.wantErr {
				var late *limiter.LateGrantError
				if !errors.As(err, &late) || !errors.Is(err, limiter.ErrUnavailable) || late.Grants != limiter.MaxLateGrants {
					t.Fatalf("Wait = %+v, %v; want a *LateGrantError of %d grants matching ErrUnavailable", r, err, limiter.MaxLateGrants)
				}
				return
			}
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if got := r.Slot.Sub(t0); got != tc.wantSlot {
				t.Errorf("spent the slot t0 + %v, want t0 + %v", got, tc.wantSlot)
			}
			if late := spentAt.Sub(r.Slot); late > margin {
				t.Errorf("handed back a slot %v after it, past the margin of %v", late, margin)
			}
			if r.Unspent != tc.wantWrites-1 {
				t.Errorf("Unspent = %d, want %d (the late grants left behind)", r.Unspent, tc.wantWrites-1)
			}
			if tc.ahead == 0 && !r.Slot.Equal(writes[len(writes)-1]) {
				t.Errorf("spent the slot %v, want the now the last write claimed, %v", r.Slot, writes[len(writes)-1])
			}
		})
	}
}
