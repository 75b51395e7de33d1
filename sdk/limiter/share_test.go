package limiter

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A lease serves the dispatcher's calls, which book ahead of the clock
// (ReserveAhead, BatchRequest.Ahead), as it serves Reserve: with no write,
// at the slot the write would have given (now + ahead), one lease interval
// after the lease's last slot and before its epoch's end. Without it every
// push of the pipeline booked its own token beside a lease it never spent.
func TestAheadGrantsComeFromTheLease(t *testing.T) {
	// Epochs of 10 s; 5 leases of half of 10/s: 1/s each, 1 s apart.
	sh := &Share{Fraction: 0.5, Leases: 5, Epoch: 10 * time.Second}
	b := Bucket{Key: "k", Limit: PerSecond(10, 20), Share: sh}
	epoch := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	type call struct {
		at, ahead time.Duration // after the epoch's start
		batch     bool
		leased    bool
		slot      time.Duration // of a leased grant
	}
	tests := []struct {
		name  string
		calls []call
	}{
		{"ahead: at the claimed now", []call{{at: 2 * time.Second, ahead: 300 * ms, slot: 2300 * ms, leased: true}}},
		{"batch ahead: at the claimed now", []call{{at: 2 * time.Second, ahead: 300 * ms, batch: true, slot: 2300 * ms, leased: true}}},
		{"no ahead", []call{{at: 2100 * ms, leased: true, slot: 2100 * ms}}},
		{"one lease interval apart, whatever the ahead", []call{
			{at: 2 * time.Second, ahead: 900 * ms, leased: true, slot: 2900 * ms},
			{at: 3 * time.Second, ahead: 800 * ms, leased: false},
			{at: 3 * time.Second, ahead: 900 * ms, leased: true, slot: 3900 * ms},
		}},
		{"not at or past the epoch's end", []call{{at: 9500 * ms, ahead: 500 * ms, leased: false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := epoch.Add(time.Second)
			steps := []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){
				granted(now.Add(100 * ms).UnixMicro()), // the write that takes the lease: its pacer's first token at 1.1 s + 1 s
			}
			for _, c := range tt.calls {
				if !c.leased {
					steps = append(steps, granted(epoch.Add(c.at+c.ahead+100*ms).UnixMicro()))
				}
			}
			s := &readsLast{scripted: &scripted{unreachable: unreachable{t}, steps: steps}}
			l, err := New(s, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			r, err := l.ReserveAhead(ctx, b, 1, time.Second, 100*ms)
			if err != nil || r.Leased {
				t.Fatalf("the first ReserveAhead = %+v, %v; want a written grant", r, err)
			}
			if got := l.ShareStats().Leases; got != 1 {
				t.Fatalf("leases taken %d, want 1", got)
			}
			for i, c := range tt.calls {
				now = epoch.Add(c.at)
				var slot time.Time
				before := len(s.sent)
				if c.batch {
					bt, err := l.ReserveBatch(ctx, b, BatchRequest{N: 1, MaxDelay: time.Second, Partial: true, Ahead: c.ahead})
					if err != nil || len(bt.Slots) != 1 {
						t.Fatalf("call %d: ReserveBatch = %+v, %v; want one slot", i, bt, err)
					}
					slot = bt.Slots[0]
				} else {
					r, err := l.ReserveAhead(ctx, b, 1, time.Second, c.ahead)
					if err != nil {
						t.Fatalf("call %d: ReserveAhead: %v", i, err)
					}
					if r.Leased != (len(s.sent) == before) {
						t.Errorf("call %d: Leased %v with %d writes", i, r.Leased, len(s.sent)-before)
					}
					slot = r.Slot
				}
				if leased := len(s.sent) == before; leased != c.leased {
					t.Fatalf("call %d at %v ahead %v: leased %v, want %v (writes so far %d)", i, c.at, c.ahead, leased, c.leased, len(s.sent))
				}
				if c.leased && !slot.Equal(epoch.Add(c.slot)) {
					t.Errorf("call %d: slot %v after the epoch's start, want %v", i, slot.Sub(epoch), c.slot)
				}
			}
		})
	}
}

// A batch takes as many slots as the lease banked (its burst) with no
// write, and books the rest with one: a clump of an invocation's pushes of
// one bucket costs a write only past what the lease holds.
func TestABatchTakesWhatTheLeaseBanked(t *testing.T) {
	epoch := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name   string
		burst  int
		n      int
		leased int // slots granted by the lease
	}{
		{"banked two, asked two", 2, 2, 2},
		{"banked two, asked three", 2, 3, 2},
		{"burst one", 1, 3, 1},
		{"banked three, asked one", 3, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// 5 leases of half of 10/s: 1/s each; the lease is taken at 1.1 s
			// and has banked its burst by 1.1 s + burst.
			sh := &Share{Fraction: 0.5, Leases: 5, Burst: tt.burst, Epoch: 10 * time.Second}
			b := Bucket{Key: "k", Limit: PerSecond(10, 20), Share: sh}
			now := epoch.Add(time.Second)
			at := epoch.Add(time.Duration(1100+1000*tt.burst) * ms)
			steps := []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){
				granted(now.Add(100 * ms).UnixMicro()),
			}
			if tt.n > tt.leased {
				steps = append(steps, granted(at.Add(time.Duration(tt.n-tt.leased)*100*ms).UnixMicro()))
			}
			s := &readsLast{scripted: &scripted{unreachable: unreachable{t}, steps: steps}}
			l, err := New(s, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := l.ReserveAhead(ctx, b, 1, time.Second, 100*ms); err != nil {
				t.Fatal(err)
			}
			now = at
			bt, err := l.ReserveBatch(ctx, b, BatchRequest{N: tt.n, MaxDelay: time.Second, Partial: true})
			if err != nil || len(bt.Slots) != tt.n {
				t.Fatalf("ReserveBatch = %+v, %v; want %d slots", bt, err, tt.n)
			}
			if got := l.ShareStats().Local; got != int64(tt.leased) {
				t.Errorf("slots granted by the lease: %d, want %d (writes %d)", got, tt.leased, len(s.sent))
			}
			for i := range tt.leased {
				if !bt.Slots[i].Equal(at) {
					t.Errorf("leased slot %d at %v, want %v", i, bt.Slots[i].Sub(epoch), at.Sub(epoch))
				}
			}
		})
	}
}

// ShareStats says why each request a lease did not grant went to the
// store: the simulation's report sums these to show which cause of the
// writes left with shares is the largest.
func TestShareStatsSayWhyNoLeaseGranted(t *testing.T) {
	// Epochs of 10 s; 5 leases of half of 10/s: 1/s each, banking 1.
	sh := &Share{Fraction: 0.5, Leases: 5, Epoch: 10 * time.Second}
	b := Bucket{Key: "k", Limit: PerSecond(10, 20), Share: sh}
	epoch := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	steps := []struct {
		name  string
		at    time.Duration // after the epoch's start
		n     int
		batch bool
		miss  map[string]int64 // what the call adds to Misses
	}{
		{"first request: no lease, the write takes one", time.Second, 1, false, map[string]int64{MissNone: 1}},
		{"before the lease's first token", 1500 * ms, 1, false, map[string]int64{MissFresh: 1}},
		{"the lease's first token", 2200 * ms, 1, false, nil},
		{"spent: its pacer is empty", 2400 * ms, 1, false, map[string]int64{MissEmpty: 1}},
		{"a batch of three: the lease grants one", 3300 * ms, 3, true, map[string]int64{MissClump: 2}},
		{"several tokens at once", 5 * time.Second, 2, false, map[string]int64{MissSeveral: 2}},
		{"the next epoch: the lease ended", 10500 * ms, 1, false, map[string]int64{MissEnded: 1}},
	}
	now := epoch
	store := &readsLast{scripted: &scripted{unreachable: unreachable{t}}}
	l, err := New(store, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string]int64{}
	for _, st := range steps {
		now = epoch.Add(st.at)
		if st.miss != nil {
			// The write leaves the bucket idle again at once.
			store.steps = append(store.steps, granted(now.UnixMicro()))
		}
		if st.batch {
			if _, err := l.ReserveBatch(ctx, b, BatchRequest{N: st.n, MaxDelay: time.Second, Partial: true}); err != nil {
				t.Fatalf("%s: ReserveBatch: %v", st.name, err)
			}
		} else if _, err := l.Reserve(ctx, b, st.n, time.Second); err != nil {
			t.Fatalf("%s: Reserve: %v", st.name, err)
		}
		for k, n := range st.miss {
			want[k] += n
		}
		if got := l.ShareStats().Misses; !maps.Equal(got, want) {
			t.Fatalf("%s: Misses %v, want %v", st.name, got, want)
		}
	}
	if got := l.ShareStats().Writes[WroteLease]; got != 2 {
		t.Errorf("writes that took a lease: %d, want 2 (one an epoch)", got)
	}
}

// A batch that finds the bucket idle takes a lease with the write that
// books it, as a single request does: an environment's first pushes of a
// bucket in an epoch are mostly a clump, and a lease taken only by a later
// single push leaves that push and the clumps before it to writes.
func TestAnIdleBatchTakesALease(t *testing.T) {
	// Epochs of 10 s; 5 leases of half of 10/s: 1/s each, banking 1.
	sh := &Share{Fraction: 0.5, Leases: 5, Epoch: 10 * time.Second}
	b := Bucket{Key: "k", Limit: PerSecond(10, 20), Share: sh}
	epoch := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name    string
		partial bool
	}{
		{"a partial batch", true},
		{"a whole batch", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := epoch.Add(time.Second)
			// The batch's write leaves the bucket idle again by 1.3 s; the
			// lease taken at 1 s has its first token at 2 s.
			s := &readsLast{scripted: &scripted{unreachable: unreachable{t}, steps: []func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error){
				granted(now.Add(300 * ms).UnixMicro()),
			}}}
			l, err := New(s, WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			bt, err := l.ReserveBatch(ctx, b, BatchRequest{N: 3, MaxDelay: time.Second, Partial: tt.partial})
			if err != nil || len(bt.Slots) != 3 {
				t.Fatalf("ReserveBatch = %+v, %v; want 3 slots", bt, err)
			}
			if got := l.ShareStats().Leases; got != 1 {
				t.Fatalf("leases taken by the batch's write: %d, want 1 (sent %q)", got, aws.ToString(s.sent[0].UpdateExpression))
			}
			// The script has no second write: the lease grants this one.
			now = epoch.Add(2100 * ms)
			r, err := l.Reserve(ctx, b, 1, time.Second)
			if err != nil || !r.Leased {
				t.Fatalf("Reserve after the lease's first token = %+v, %v; want a leased grant", r, err)
			}
		})
	}
}

// A share-aware write whose condition failed is counted by what the item
// it handed back shows (ShareStats.Failed): a cost analysis needs to tell
// guesses of the bucket's form that another writer overtook from lease
// counts that moved.
func TestFailedShareWritesAreCountedByWhatTheItemShowed(t *testing.T) {
	const now, limit = 1_000_000, 3_000_000
	itemOf := func(tat int64, count map[int64]int64) map[string]types.AttributeValue {
		it := item(tat, "")
		it[markAttribute], it[unknownAttribute] = num(tat), num(0)
		for k, n := range count {
			it[countAttribute(k)] = num(n)
		}
		return it
	}
	tests := []struct {
		name string
		f    form
		sf   shareForm
		v    shareView
		item map[string]types.AttributeValue
		want string
	}{
		{"an idle guess overtaken", idle, whole, shareView{epoch: 7}, itemOf(now+200_000, nil), FailedIdle},
		{"a busy guess of a bucket gone idle", busy, marked, shareView{epoch: 7}, itemOf(now-1, nil), FailedBusy},
		{"busy past the limit", busy, marked, shareView{epoch: 7}, itemOf(limit+1, nil), FailedLimit},
		{"a shared write written over by an unaware one", busy, marked, shareView{epoch: 7}, func() map[string]types.AttributeValue {
			it := itemOf(now+1000, nil)
			it[markAttribute] = num(now)
			return it
		}(), FailedMark},
		{"more leases than it asserted", busy, marked, shareView{epoch: 7, n: 3}, itemOf(now+1000, map[int64]int64{7: 4}), FailedCount},
		{"the epoch's leases all taken", idle, lease, shareView{epoch: 7, n: 11}, itemOf(now-1, map[int64]int64{7: 12}), FailedCount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := failedWhy(tt.f, tt.sf, tt.v, 12, tt.item, now, limit); got != tt.want {
				t.Fatalf("failedWhy = %q, want %q", got, tt.want)
			}
		})
	}
}
