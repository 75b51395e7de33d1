package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// shareFleet is the leased-share tests' set-up: a fresh table, a manual
// clock at an epoch's start, and a bucket of 10/s, burst 20, whose leases
// hold at most half the rate (5 leases of 1/s), in epochs of 10 s, taken
// 1 s after the last write that did not know them.
type shareFleet struct {
	table string
	clock *limitertest.Clock
	t0    time.Time
	b     limiter.Bucket
}

func newShareFleet(t *testing.T) shareFleet {
	t.Helper()
	clock := newClock()
	clock.Set(clock.Now().Truncate(time.Minute))
	return shareFleet{table: emulator.NewTable(t, emulator.DynamoDB(t)), clock: clock, t0: clock.Now(),
		b: limiter.Bucket{Key: "booking_com#cred-1#rates", Limit: limiter.PerSecond(10, 20),
			Share: &limiter.Share{Fraction: 0.5, Leases: 5, Epoch: 10 * time.Second, Quiet: time.Second}}}
}

func (f shareFleet) worker(t *testing.T) worker {
	t.Helper()
	return newWorker(t, f.table, limiter.WithClock(f.clock.Now))
}

func (f shareFleet) at(d time.Duration) { f.clock.Set(f.t0.Add(d)) }

// take is one Take of 1 on b: the grant, or false for a denial.
func take(t *testing.T, w worker, b limiter.Bucket) (limiter.Reservation, bool) {
	t.Helper()
	r, err := w.Take(context.Background(), b, 1)
	if errors.Is(err, limiter.ErrExhausted) {
		return r, false
	}
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return r, true
}

// Five environments lease half the rate in the first epoch and spend it
// locally while a sixth takes the shared rest as fast as it is let; in the
// second epoch the leases have run out and the shared part alone takes the
// whole rate again. Every window of the grants, counted by package window,
// stays within burst + rate·W, and the shared part gets the rate the
// leases held only after they expired.
func TestShareShrinksBeforeTheSharedPartGrows(t *testing.T) {
	t.Parallel()
	f := newShareFleet(t)
	b := f.b
	holders := make([]worker, 5)
	for i := range holders {
		holders[i] = f.worker(t)
	}
	shared := f.worker(t)
	var grants []time.Time
	record := func(r limiter.Reservation, ok bool) {
		if ok {
			grants = append(grants, r.Slot)
		}
	}
	// The first write finds no item: it marks the bucket and starts the
	// quiet period.
	f.at(0)
	record(take(t, shared, b))
	// After it, each holder's first Take finds the shared part idle and
	// takes a lease with its grant.
	step := 250 * time.Millisecond
	for i, h := range holders {
		f.at(2*time.Second + time.Duration(i)*step)
		r, ok := take(t, h, b)
		record(r, ok)
		if !ok || r.Leased {
			t.Fatalf("holder %d's first Take: granted %v, leased %v; want a written grant", i, ok, r.Leased)
		}
	}
	// From 4 s to 16 s in 10 ms steps: each holder asks when its lease's
	// pacer has a token (each second after its lease), the shared worker
	// every step.
	var local, localAfter, sharedFirst, writtenSecond int
	epochEnd := 10 * time.Second
	for d := 4 * time.Second; d < 16*time.Second; d += 10 * time.Millisecond {
		f.at(d)
		for i, h := range holders {
			if (d-time.Duration(i)*step)%time.Second != 0 {
				continue
			}
			r, ok := take(t, h, b)
			record(r, ok)
			switch {
			case ok && r.Leased:
				local++
				if d >= epochEnd {
					localAfter++
				}
			case ok && d >= 12*time.Second:
				writtenSecond++
			}
		}
		r, ok := take(t, shared, b)
		record(r, ok)
		if ok {
			switch {
			case d >= 5*time.Second && d < epochEnd:
				sharedFirst++
			case d >= 12*time.Second:
				writtenSecond++
			}
		}
	}
	t.Logf("local grants %d (after the epoch %d); shared grants 5-10 s %d, written grants 12-16 s %d", local, localAfter, sharedFirst, writtenSecond)
	if localAfter != 0 {
		t.Errorf("%d local grants after the leases' epoch ended; want 0", localAfter)
	}
	if local < 25 {
		t.Errorf("%d local grants from 5 leases of 1/s over 6 s; want at least 25 (the leases were not spent)", local)
	}
	// The shared part ran at 5/s while the leases held half the rate, and
	// at the whole 10/s once they had run out (from 12 s: the slots it
	// booked at 5/s, up to its tolerance of 15 tokens ahead, 3 s, had to
	// pass the 1.5 s the whole rate keeps).
	if sharedFirst > 5*5+1 {
		t.Errorf("shared grants 5-10 s: %d; want at most 26 (5/s beside the leases)", sharedFirst)
	}
	if writtenSecond < 4*10-1 {
		t.Errorf("written grants 12-16 s: %d; want at least 39 (the whole rate after the leases expired)", writtenSecond)
	}
	assertFleetInvariant(t, grants, b.Limit, 0)
}

// A worker of today's release (a bucket with no Share: it writes tat alone)
// books beside workers of the new release. For 4 s it takes one token
// every 500 ms and the bucket idles in between; then it takes all it can.
// Each new worker finds a write that did not know the shares and takes no
// lease until the bucket has gone Quiet (1 s) without one: it books every
// request, and every window keeps burst + rate·W (no new worker has run
// for Quiet, which covers the old worker's run). New workers that leased
// in the first 4 s would spend their leases beside the old worker's whole
// rate after it.
func TestMixedReleasesKeepTheBound(t *testing.T) {
	t.Parallel()
	f := newShareFleet(t)
	// Quiet covers the old worker's whole run, as it covers an invocation
	// of the release before a deployment.
	f.b.Share.Quiet = time.Minute
	old := f.worker(t)
	plain := f.b
	plain.Share = nil
	news := []worker{f.worker(t), f.worker(t), f.worker(t)}
	var grants []time.Time
	var leased int
	for d := time.Duration(0); d < 10*time.Second; d += 100 * time.Millisecond {
		f.at(d)
		busy := d >= 4*time.Second
		if busy || d%(500*time.Millisecond) == 0 {
			for {
				r, ok := take(t, old, plain)
				if ok {
					grants = append(grants, r.Slot)
				}
				if !ok || !busy {
					break
				}
			}
		}
		if busy || d%(500*time.Millisecond) == 200*time.Millisecond {
			for _, w := range news {
				if r, ok := take(t, w, f.b); ok {
					grants = append(grants, r.Slot)
					if r.Leased {
						leased++
					}
				}
			}
		}
	}
	t.Logf("%d grants, %d of them leased", len(grants), leased)
	if leased != 0 {
		t.Errorf("%d grants from leases beside a worker of today's release; want 0", leased)
	}
	assertFleetInvariant(t, grants, f.b.Limit, 0)
}

// Six environments write one bucket in each of three epochs while it
// idles: the first five each take a lease with their first write of the
// epoch, the sixth finds none left, and one of them writes again after
// the others' leases changed the count it last saw. The only write that
// fails its condition is the sixth's ask for a lease when none is left
// (once an epoch): a lease write asserts only that the epoch has a lease
// left (its count's name carries the epoch, so no environment guesses
// whether the epoch's count has begun), and an idle one-token grant is
// charged at the whole carve and asserts no count.
func TestLeaseWritesDoNotGuessTheEpochsCount(t *testing.T) {
	t.Parallel()
	f := newShareFleet(t)
	f.b.Share.Quiet = 0
	f.b.Share.Burst = 1
	ws := make([]worker, 6)
	for i := range ws {
		ws[i] = f.worker(t)
	}
	var grants []time.Time
	leased := 0
	ask := func(w worker, at time.Duration) {
		t.Helper()
		f.at(at)
		r, ok := take(t, w, f.b)
		if !ok {
			t.Fatalf("Take at %v denied on an idle bucket", at)
		}
		grants = append(grants, r.Slot)
		if r.Leased {
			leased++
		}
	}
	const epochs = 3
	for e := range epochs {
		start := time.Duration(e) * f.b.Share.Epoch
		ask(ws[0], start+100*time.Millisecond) // takes a lease
		ask(ws[0], start+150*time.Millisecond) // books: its lease has no token yet
		for i := 1; i < len(ws); i++ {
			ask(ws[i], start+100*time.Millisecond+time.Duration(i)*500*time.Millisecond) // four leases, then none left
		}
		ask(ws[0], start+3*time.Second)                     // from its lease
		ask(ws[0], start+3*time.Second+50*time.Millisecond) // books, having seen one lease taken
	}
	var writes int64
	for _, w := range ws {
		writes += w.calls.Answered()
	}
	t.Logf("%d grants, %d leased, %d writes answered", len(grants), leased, writes)
	if leased != epochs {
		t.Errorf("%d leased grants; want %d (one an epoch)", leased, epochs)
	}
	if want := int64(9 * epochs); writes != want {
		t.Errorf("%d writes; want %d, one a written grant and one an epoch for the sixth environment's lease ask: the rest failed their conditions", writes, want)
	}
	assertFleetInvariant(t, grants, f.b.Limit, 0)
}
