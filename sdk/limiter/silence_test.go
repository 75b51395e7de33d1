package limiter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// readable is scripted with GetItem answering item, counting the reads.
type readable struct {
	*scripted
	item  map[string]types.AttributeValue
	reads int
}

func (r *readable) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.reads++
	return &dynamodb.GetItemOutput{Item: r.item}, nil
}

// Silence answers from the last store answer about the item while that
// call was sent within SilenceAfter, and reads the item otherwise; the
// silence is the item's su or, adaptive, a throttle's Since, whichever
// ends later, and none once now has passed it.
func TestSilenceReadsOnlyWhenItsLastAnswerIsOld(t *testing.T) {
	t0 := time.UnixMicro(1_000_000_000)
	now := t0
	b := Bucket{Key: "k", Limit: PerSecond(10, 2)}
	withSilence := func(it map[string]types.AttributeValue, su, since int64) map[string]types.AttributeValue {
		if su != 0 {
			it[silenceAttribute] = num(su)
		}
		if since != 0 {
			it[sinceAttribute] = num(since)
		}
		return it
	}
	tests := []struct {
		name      string
		answered  map[string]types.AttributeValue // the grant's answer, at t0
		stored    map[string]types.AttributeValue // what a read finds
		at        time.Duration                   // when Silence is asked, after t0
		want      time.Duration                   // the silence's end after t0; 0: none
		wantReads int
	}{
		{"fresh answer, no silence", item(t0.UnixMicro()+100_000, ""), nil, 50 * time.Millisecond, 0, 0},
		{"fresh answer, inside its silence", withSilence(item(t0.UnixMicro()+100_000, ""), t0.UnixMicro()+3_000_000, 0), nil, 50 * time.Millisecond, 3 * time.Second, 0},
		{"old answer: read finds a silence written since", item(t0.UnixMicro()+100_000, ""),
			withSilence(item(t0.UnixMicro()+9_000_000, ""), t0.UnixMicro()+4_000_000, 0), time.Second, 4 * time.Second, 1},
		{"old answer: read finds a throttle's Since", item(t0.UnixMicro()+100_000, ""),
			withSilence(item(t0.UnixMicro()+9_000_000, ""), t0.UnixMicro()+2_000_000, t0.UnixMicro()+5_000_000), time.Second, 5 * time.Second, 1},
		{"old answer: read finds the silence over", item(t0.UnixMicro()+100_000, ""),
			withSilence(item(t0.UnixMicro()+9_000_000, ""), t0.UnixMicro()+500_000, 0), time.Second, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = t0
			s := &readable{scripted: &scripted{unreachable: unreachable{t}}, item: tt.stored}
			s.steps = append(s.steps, func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				return &dynamodb.UpdateItemOutput{Attributes: tt.answered}, nil
			})
			l, err := New(s, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Take(context.Background(), b, 1); err != nil {
				t.Fatal(err)
			}
			now = t0.Add(tt.at)
			until, err := l.Silence(context.Background(), b)
			if err != nil {
				t.Fatal(err)
			}
			var got time.Duration
			if !until.IsZero() {
				got = until.Sub(t0)
			}
			if got != tt.want || s.reads != tt.wantReads {
				t.Fatalf("silence ends t0+%v after %d reads, want t0+%v after %d", got, s.reads, tt.want, tt.wantReads)
			}
		})
	}
}

// A penalty whose silence an earlier, longer one covers writes tat alone,
// and one whose tat the item already passed writes the silence alone: a
// failed condition's item says which of the two still needs writing, and
// neither goes back.
func TestPenaltyWritesWhatTheItemLacks(t *testing.T) {
	now := time.UnixMicro(1_000_000_000)
	b := Bucket{Key: "k", Limit: PerSecond(10, 2)} // burst·T = 200 ms
	until := now.Add(5 * time.Second)
	ok := func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return &dynamodb.UpdateItemOutput{}, nil
	}
	tests := []struct {
		name string
		had  map[string]types.AttributeValue // the first write's failed condition
		want string                          // the second write
	}{
		{"longer silence already", func() map[string]types.AttributeValue {
			it := item(now.UnixMicro(), "")
			it[silenceAttribute] = num(until.UnixMicro() + 1)
			return it
		}(), "SET #tat = :p, #ttl = :ttl"},
		{"tat already past the penalty", item(until.UnixMicro()+time.Second.Microseconds(), ""), "SET #su = :u"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{unreachable: unreachable{t}}
			s.steps = append(s.steps, failWith(tt.had), ok)
			l, err := New(s, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Penalize(context.Background(), b, until); err != nil || len(s.sent) != 2 {
				t.Fatalf("penalty: %v after %d writes, want 2", err, len(s.sent))
			}
			if got := aws.ToString(s.sent[1].UpdateExpression); got != tt.want {
				t.Fatalf("second write %q, want %q", got, tt.want)
			}
		})
	}
}

// KnownSilence answers from what this process last learned of the item,
// however old, with no call (the unreachable store fails the test on
// one): the silence's end, su or a throttle's Since, whichever is later,
// while now lies inside it; none past it, or for a bucket it learned
// nothing of.
func TestKnownSilenceAnswersWithNoCall(t *testing.T) {
	t0 := time.UnixMicro(1_000_000_000)
	b := Bucket{Key: "k", Limit: PerSecond(10, 2)}
	tests := []struct {
		name   string
		su     time.Duration // the answer's silence, after t0; 0: none
		since  time.Duration // the answer's throttle Since, after t0; 0: none
		at     time.Duration // when KnownSilence is asked, after t0
		bucket string
		want   time.Duration // the silence's end after t0; 0: none
	}{
		{"long after the answer, inside its silence", 15 * time.Minute, 0, 10 * time.Minute, "k", 15 * time.Minute},
		{"a throttle's Since ends later", 2 * time.Minute, 3 * time.Minute, time.Minute, "k", 3 * time.Minute},
		{"past its end", 15 * time.Minute, 0, 16 * time.Minute, "k", 0},
		{"no silence answered", 0, 0, time.Minute, "k", 0},
		{"a bucket it learned nothing of", 15 * time.Minute, 0, time.Minute, "other", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			answered := item(t0.UnixMicro()+100_000, "")
			if tt.su != 0 {
				answered[silenceAttribute] = num(t0.Add(tt.su).UnixMicro())
			}
			if tt.since != 0 {
				answered[sinceAttribute] = num(t0.Add(tt.since).UnixMicro())
			}
			s := &scripted{unreachable: unreachable{t}}
			s.steps = append(s.steps, func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				return &dynamodb.UpdateItemOutput{Attributes: answered}, nil
			})
			l, err := New(s, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Take(context.Background(), b, 1); err != nil {
				t.Fatal(err)
			}
			now = t0.Add(tt.at)
			var got time.Duration
			if until := l.KnownSilence(Bucket{Key: tt.bucket, Limit: b.Limit}); !until.IsZero() {
				got = until.Sub(t0)
			}
			if got != tt.want || len(s.sent) != 1 {
				t.Fatalf("known silence ends t0+%v after %d writes, want t0+%v after the grant's one", got, len(s.sent), tt.want)
			}
		})
	}
}

// A 429 heard while the store is out is known to the process that heard
// it, though its Penalize (or Throttle) write failed: the local share
// paces from KnownSilence exactly then. A later answer without the
// silence (the write not landed yet) does not make it forget.
func TestKnownSilenceKeepsAPenaltyWhoseWriteFailed(t *testing.T) {
	t0 := time.UnixMicro(1_000_000_000)
	down := func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return nil, errors.New("injected: store unreachable")
	}
	plain := Bucket{Key: "k", Limit: PerSecond(10, 2)}
	adaptive := Bucket{Key: "a", Limit: PerSecond(10, 2), Adaptive: &Adaptive{MinRate: 1, Quiet: 10 * time.Second, Increase: 1}}
	tests := []struct {
		name  string
		b     Bucket
		asked func(l *Limiter, b Bucket, until time.Time) error
	}{
		{"Penalize", plain, func(l *Limiter, b Bucket, until time.Time) error { return l.Penalize(context.Background(), b, until) }},
		{"Throttle of an adaptive bucket", adaptive, func(l *Limiter, b Bucket, until time.Time) error {
			return l.Throttle(context.Background(), b, nil, until)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			s := &scripted{unreachable: unreachable{t}}
			s.steps = append(s.steps, down, func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				return &dynamodb.UpdateItemOutput{Attributes: item(t0.UnixMicro()+100_000, "")}, nil
			})
			l, err := New(s, WithClock(func() time.Time { return now }), WithMaxAttempts(1))
			if err != nil {
				t.Fatal(err)
			}
			until := t0.Add(15 * time.Minute)
			if err := tt.asked(l, tt.b, until); err == nil {
				t.Fatal("the write against a store that is down succeeded")
			}
			now = t0.Add(time.Second)
			if _, err := l.Take(context.Background(), Bucket{Key: tt.b.Key, Limit: tt.b.Limit}, 1); err != nil {
				t.Fatal(err)
			}
			now = t0.Add(time.Minute)
			if got := l.KnownSilence(tt.b); !got.Equal(until) {
				t.Fatalf("known silence after a failed write and an answer without it = %v, want %v", got, until)
			}
		})
	}
}
