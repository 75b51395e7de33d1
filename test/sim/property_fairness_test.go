package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// Per-property fairness: each property's bucket is nested inside the
// credential's (both in one TakeMulti). One noisy property asks for ten
// times its share; nine quiet ones ask for 80% of theirs. Nested, the
// quiet ones get what they ask within their share and the credential
// stays within its quota; with the credential bucket alone (logged for
// comparison) the noisy one takes what the quiet ones needed. The subject
// is the limiter's nesting, not the store: every worker's limiter runs on
// one in-memory DynamoDB with the emulators' latency, in a bubble whose
// clock is virtual, for 6 s of it.
func TestPropertyFairness(t *testing.T) {
	const (
		properties = 10
		runFor     = 6 * time.Second
	)
	credLimit := limiter.PerSecond(20, 20)
	share := limiter.PerSecond(credLimit.Rate/properties, 2) // quota / 10
	for _, nested := range []bool{true, false} {
		name := map[bool]string{true: "nested", false: "credential only"}[nested]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { propertyFairness(t, nested, properties, runFor, credLimit, share) })
		})
	}
}

func propertyFairness(t *testing.T, nested bool, properties int, runFor time.Duration, credLimit, share limiter.Limit) {
	db := NewDB(rand.New(rand.NewPCG(1, 1)), Latency{P50: 52 * time.Millisecond, P99: 170 * time.Millisecond})
	if err := limiter.CreateTable(context.Background(), db, "limits"); err != nil {
		t.Fatal(err)
	}
	cred := limiter.Bucket{Key: "bk#cred-1#rates", Limit: credLimit}
	var (
		mu        sync.Mutex
		credGrant []time.Time
		propGrant = make([][]time.Time, properties)
		asked     = make([]int, properties)
		// quietDenied counts the quiet properties' denials by the bucket
		// that denied.
		quietDenied = map[string]int{}
	)
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(runFor))
	defer cancel()
	var wg sync.WaitGroup
	// Property 0 is noisy: 4 workers, each asking every 200 ms = 20/s, ten
	// times its share. The others: one worker asking every 625 ms =
	// 1.6/s, within their share, out of phase.
	for p := range properties {
		prop := limiter.Bucket{Key: fmt.Sprintf("bk#cred-1#rates#hotel-%d", p), Limit: share}
		buckets := []limiter.Bucket{cred, prop}
		if !nested {
			buckets = []limiter.Bucket{cred}
		}
		workers, every := 1, time.Duration(float64(time.Second)/(0.8*share.Rate))
		if p == 0 {
			workers, every = 4, 4*time.Duration(float64(time.Second)/(10*share.Rate))
		}
		for k := range workers {
			w, err := limiter.New(db, limiter.WithTable("limits"))
			if err != nil {
				t.Fatal(err)
			}
			phase := time.Duration(p*workers+k) * every / time.Duration(properties*workers)
			wg.Go(func() {
				tick := time.NewTicker(every)
				defer tick.Stop()
				time.Sleep(phase)
				for ctx.Err() == nil {
					r, err := w.TakeMulti(context.Background(), buckets, 1)
					mu.Lock()
					asked[p]++
					if err == nil {
						credGrant = append(credGrant, r.Slot)
						propGrant[p] = append(propGrant[p], r.Slot)
					}
					if ex := (*limiter.ExhaustedError)(nil); p > 0 && errors.As(err, &ex) {
						quietDenied[ex.Key]++
					}
					mu.Unlock()
					if err != nil && !errors.Is(err, limiter.ErrExhausted) {
						t.Errorf("TakeMulti: %v", err)
						return
					}
					select {
					case <-tick.C:
					case <-ctx.Done():
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	name := map[bool]string{true: "nested", false: "credential only"}[nested]
	withinLimit(t, "the credential", credGrant, credLimit)
	shareBound := float64(share.Burst) + share.Rate*elapsed.Seconds()
	minQuiet := 1.0
	for p := 1; p < properties; p++ {
		minQuiet = min(minQuiet, float64(len(propGrant[p]))/float64(asked[p]))
	}
	t.Logf("%s: noisy property granted %d of %d asked (its share allows %.1f); quiet ones granted at least %.0f%% of what they asked; credential %d grants in %v (quota %.1f); quiet properties' denials by bucket: %v",
		name, len(propGrant[0]), asked[0], shareBound, minQuiet*100, len(credGrant), elapsed,
		float64(credLimit.Burst)+credLimit.Rate*elapsed.Seconds(), quietDenied)
	if !nested {
		return
	}
	withinLimit(t, "the noisy property", propGrant[0], share)
	quietAsked, quietGranted := 0, 0
	for p := 1; p < properties; p++ {
		quietAsked, quietGranted = quietAsked+asked[p], quietGranted+len(propGrant[p])
		if got := float64(len(propGrant[p])) / float64(asked[p]); got < 0.8 {
			t.Errorf("quiet property %d: %d of %d asked granted (%.0f%%), want ≥ 80%%", p, len(propGrant[p]), asked[p], got*100)
		}
	}
	if got := float64(quietGranted) / float64(quietAsked); got < 0.9 {
		t.Errorf("quiet properties: %d of %d asked granted (%.0f%%), want ≥ 90%%", quietGranted, quietAsked, got*100)
	}
}

// withinLimit fails t when grants put more than burst + rate·W in any
// window W (package window, not sdk/gcra).
func withinLimit(t *testing.T, who string, grants []time.Time, lim limiter.Limit) {
	t.Helper()
	sort.Slice(grants, func(i, j int) bool { return grants[i].Before(grants[j]) })
	w, broken := window.Fullest(grants, window.Limit{Rate: lim.Rate, Burst: lim.Burst})
	if broken {
		t.Errorf("%s's grants exceed burst %d + rate %v × window: %v", who, lim.Burst, lim.Rate, w)
	}
}
