package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A learned cap climbs by one each quiet period (CapQuiet·2^Probes) with
// no write, and stops applying at MaxLeases; a throttle lowers it to one
// below the effective cap, or, with none, to half the requests the
// process had at the vendor, never below 1; a request sent before the cap
// was learned lowers nothing; one met while climbing doubles the quiet.
func TestLearnedInFlightCapClimbsAndLowers(t *testing.T) {
	q := CapQuiet.Microseconds()
	const at = int64(1_000_000_000)
	tests := []struct {
		name      string
		c         InFlightCap
		now, sent int64
		inFlight  int
		effective int // at now
		want      InFlightCap
		lowered   bool
	}{
		{"none learned, 4 at the vendor: 2", InFlightCap{}, at, at, 4, 0, InFlightCap{Max: 2, At: at}, true},
		{"none learned, 40 at the vendor: half of MaxLeases", InFlightCap{}, at, at, 40, 0, InFlightCap{Max: MaxLeases / 2, At: at}, true},
		{"none learned, 2 at the vendor: 1", InFlightCap{}, at, at, 2, 0, InFlightCap{Max: 1, At: at}, true},
		{"3 learned, just now: one below", InFlightCap{Max: 3, At: at}, at + 1, at + 1, 2, 3, InFlightCap{Max: 2, At: at + 1}, true},
		{"1 learned: nothing lower", InFlightCap{Max: 1, At: at}, at + 1, at + 1, 2, 1, InFlightCap{Max: 1, At: at}, false},
		{"sent before it was learned: nothing", InFlightCap{Max: 3, At: at}, at + 10, at - 1, 5, 3, InFlightCap{Max: 3, At: at}, false},
		{"1 learned a quiet period ago: 2, a failed raise back to 1", InFlightCap{Max: 1, At: at}, at + q, at + q, 2, 2, InFlightCap{Max: 1, At: at + q, Probes: 1}, true},
		{"1 learned a quiet period ago after a failed raise: still 1", InFlightCap{Max: 1, At: at, Probes: 1}, at + q, at + q, 2, 1, InFlightCap{Max: 1, At: at, Probes: 1}, false},
		{"probes capped at 3", InFlightCap{Max: 1, At: at, Probes: 3}, at + 8*q, at + 8*q, 2, 2, InFlightCap{Max: 1, At: at + 8*q, Probes: 3}, true},
		{"climbed back to MaxLeases: none", InFlightCap{Max: 1, At: at}, at + (MaxLeases-1)*q, at, 2, 0, InFlightCap{Max: 1, At: at + (MaxLeases-1)*q}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Effective(tt.now); got != tt.effective {
				t.Errorf("Effective = %d, want %d", got, tt.effective)
			}
			got, ok := tt.c.Lowered(tt.now, tt.sent, tt.inFlight)
			if ok != tt.lowered || got != tt.want {
				t.Errorf("Lowered = %+v, %v; want %+v, %v", got, ok, tt.want, tt.lowered)
			}
		})
	}
}

// capItem is a bucket's item carrying a learned cap.
func capItem(n, at int64) map[string]types.AttributeValue {
	it := item(at, "")
	it[capAttribute], it[capAtAttribute], it[capProbesAttribute] = num(n), num(at), num(0)
	return it
}

// LowerInFlight writes once, conditional on the cap this process last
// saw in a store answer (every grant's: learnSilence learns it), and not
// at all when that cap is already as low or newer than the request; a
// failed condition's item is learned, and lowered from only if it is
// still higher. InFlightCap answers from what was learned, with no call.
func TestLowerInFlightWritesOnlyWhatItLowers(t *testing.T) {
	t0 := time.UnixMicro(1_000_000_000)
	ok := func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return &dynamodb.UpdateItemOutput{}, nil
	}
	lowerSince := func(n, at int64) func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return nil, &types.ConditionalCheckFailedException{Message: aws.String("changed"), Item: capItem(n, at)}
		}
	}
	type step = func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	tests := []struct {
		name     string
		answered map[string]types.AttributeValue // a grant's answer, at t0
		sent     time.Duration                   // the throttled request's send, after t0
		inFlight int
		steps    []step
		wantIC   []string // each write's :ic
		wantSeen []string // each write's :sic ("" for none seen)
		wantCap  int      // InFlightCap after
	}{
		{"none learned: one write, on no cap", item(t0.UnixMicro(), ""), time.Second, 4, []step{ok}, []string{"2"}, []string{""}, 2},
		{"3 learned from a grant: one write, on 3", capItem(3, t0.UnixMicro()), time.Second, 2, []step{ok}, []string{"2"}, []string{"3"}, 2},
		{"3 learned after the request left: no write", capItem(3, t0.UnixMicro()+2_000_000), time.Second, 2, nil, nil, nil, 3},
		{"1 learned: no write", capItem(1, t0.UnixMicro()), time.Second, 3, nil, nil, nil, 1},
		{"another lowered it to 1 meanwhile: learned, no second write", item(t0.UnixMicro(), ""), time.Second, 4,
			[]step{lowerSince(1, t0.UnixMicro()+500_000)}, []string{"2"}, []string{""}, 1},
		{"another lowered it to 4 long before the request: lowered from it", item(t0.UnixMicro(), ""), time.Second, 20,
			[]step{lowerSince(4, t0.UnixMicro()+500_000), ok}, []string{"10", "3"}, []string{"", "4"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{unreachable: unreachable{t}, steps: tt.steps}
			now := t0
			l, err := New(s, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			l.learnSilence("k", tt.answered, t0.UnixMicro())
			now = t0.Add(tt.sent + 100*time.Millisecond)
			if err := l.LowerInFlight(context.Background(), "k", tt.inFlight, t0.Add(tt.sent)); err != nil {
				t.Fatal(err)
			}
			if len(s.sent) != len(tt.wantIC) {
				t.Fatalf("%d writes, want %d", len(s.sent), len(tt.wantIC))
			}
			for i, in := range s.sent {
				if got, seen := value(in, ":ic"), value(in, ":sic"); got != tt.wantIC[i] || seen != tt.wantSeen[i] {
					t.Errorf("write %d: cap %q on seen %q, want %q on %q", i, got, seen, tt.wantIC[i], tt.wantSeen[i])
				}
			}
			if got := l.InFlightCap("k"); got != tt.wantCap {
				t.Errorf("InFlightCap = %d, want %d", got, tt.wantCap)
			}
		})
	}
}
