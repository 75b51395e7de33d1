package limiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// readsLast is scripted with GetItem answering the item the last write
// that landed handed back, counting the reads: the store as a lease's
// process would read it when nothing else wrote.
type readsLast struct {
	*scripted
	last  map[string]types.AttributeValue
	reads int
}

func (r *readsLast) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := r.scripted.UpdateItem(ctx, in, opts...)
	if err == nil && out != nil {
		r.last = out.Attributes
	}
	return out, err
}

func (r *readsLast) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.reads++
	return &dynamodb.GetItemOutput{Item: r.last}, nil
}

// A lease grants with no write, so a silence another environment wrote to
// the item after this process last heard from it is read before the lease
// grants (heardForLease): without the read, the lease sent inside the
// silence the vendor asked of the whole credential (adversary seed 1093).
// A lease with no token to give reads nothing, and a tat the busy shared
// part left is no penalty.
func TestALeaseReadsASilenceWrittenSinceItsProcessLastHeard(t *testing.T) {
	// Epochs of 10 s; 5 leases of half of 10/s: 1/s each, banking 1.
	sh := &Share{Fraction: 0.5, Leases: 5, Epoch: 10 * time.Second}
	b := Bucket{Key: "k", Limit: PerSecond(10, 20), Share: sh}
	epoch := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, tt := range []struct {
		name     string
		silenced bool          // another environment penalized the bucket at 1.5 s
		at       time.Duration // of the Reserve, after the epoch's start
		leased   bool
		reads    int
	}{
		{"silenced since: read, and not granted", true, 2200 * ms, false, 1},
		{"nothing since: read, and granted", false, 2200 * ms, true, 1},
		// Before the lease's first token: the write path, and no read.
		{"the lease's pacer empty: no read", false, 1500 * ms, false, 0},
		// The shared part busy: its 15 tokens at 5/s run the item's tat
		// up to 3 s ahead, past the bucket's own 2 s, and that is no
		// penalty.
		{"the shared part busy: read, and granted", false, 2200 * ms, true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := epoch.Add(time.Second)
			s := &readsLast{scripted: &scripted{unreachable: unreachable{t}, steps: []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){
				granted(now.Add(100 * ms).UnixMicro()), // takes the lease: its first token at 2.1 s
			}}}
			l, err := New(s, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if r, err := l.Reserve(ctx, b, 1, time.Second); err != nil || r.Leased || l.ShareStats().Leases != 1 {
				t.Fatalf("the first Reserve = %+v, %v (leases %d); want a written grant that takes a lease", r, err, l.ShareStats().Leases)
			}
			until := epoch.Add(time.Hour)
			if tt.silenced {
				it := item(until.UnixMicro(), "")
				it[silenceAttribute] = num(until.UnixMicro())
				s.last = it
				// The write that confirms the denial finds the silence.
				s.steps = append(s.steps, failWith(it))
			}
			if strings.HasPrefix(tt.name, "the shared part busy") {
				s.last = item(epoch.Add(tt.at+2800*ms).UnixMicro(), "")
			}
			if !tt.silenced && !tt.leased {
				s.steps = append(s.steps, granted(epoch.Add(tt.at).UnixMicro()))
			}
			now = epoch.Add(tt.at)
			r, err := l.Reserve(ctx, b, 1, time.Second)
			var ex *ExhaustedError
			if tt.silenced && !errors.As(err, &ex) || !tt.silenced && err != nil {
				t.Fatalf("Reserve at %v = %+v, %v; want %s", tt.at, r, err, map[bool]string{true: "a denial behind the silence", false: "a grant"}[tt.silenced])
			}
			if r.Leased != tt.leased || s.reads != tt.reads {
				t.Errorf("Reserve at %v: leased %v after %d reads, want leased %v after %d (silence to %v)", tt.at, r.Leased, s.reads, tt.leased, tt.reads, until.Sub(epoch))
			}
		})
	}
}
