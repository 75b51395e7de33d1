package mockota

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// Five requests of one credential at once against MaxConcurrent 2: the
// vendor works on two and refuses three with 429 (charging no token), its
// peak count is five, another credential is not affected, and once they
// are answered a new one is accepted. The concurrency policy is published.
func TestMaxConcurrentCountsTheVendorsOwnRequests(t *testing.T) {
	s, _ := start(t, Config{Limit: gcra.Limit{Rate: 100, Burst: 10}, MaxConcurrent: 2, PublishConcurrency: true, Latency: 2 * time.Second,
		Now: time.Now})
	var wg sync.WaitGroup
	statuses := make([]int, 5)
	var policy string
	for i := range statuses {
		wg.Go(func() {
			r, err := trySend(s, call{cred: "c1", job: fmt.Sprint("j", i)})
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = r.status
			if i == 0 {
				policy = r.header.Get("RateLimit-Policy")
			}
		})
	}
	// Wait until all five are in the vendor's handlers, then one of
	// another credential.
	for deadline := time.Now().Add(time.Second); s.PeakConcurrent("c1", "availability") < 5 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if r := post(t, s, "c2", "availability", "other"); r.status != http.StatusOK {
		t.Errorf("another credential answered %d, want 200", r.status)
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, st := range statuses {
		switch st {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			refused++
		}
	}
	if ok != 2 || refused != 3 || s.PeakConcurrent("c1", "availability") != 5 {
		t.Fatalf("statuses %v, peak %d; want 2 accepted, 3 refused, peak 5", statuses, s.PeakConcurrent("c1", "availability"))
	}
	if policy != `"concurrency";q=2;qu="concurrent-requests"` {
		t.Errorf("RateLimit-Policy %q, want the concurrency quota", policy)
	}
	if r := post(t, s, "c1", "availability", "after"); r.status != http.StatusOK {
		t.Errorf("after the answers, a new request answered %d, want 200", r.status)
	}
}

// With Gather 2, the first requests of a credential and endpoint wait
// (at most GatherWait, 20 s: a vendor that kept them for it shows by the
// time alone) only until a second runs beside the first: both are then
// answered. Once two have run together, a request alone is answered at
// once, with no wait.
func TestGatherHoldsTheFirstRequestsUntilThatManyRunTogether(t *testing.T) {
	const wait = 20 * time.Second
	s, _ := start(t, Config{Limit: gcra.Limit{Rate: 100, Burst: 10}, Gather: 2, GatherWait: wait, Now: time.Now})
	t0 := time.Now()
	first := make(chan int, 1)
	go func() {
		r, err := trySend(s, call{cred: "c1", job: "first"})
		if err != nil {
			t.Error(err)
		}
		first <- r.status
	}()
	for deadline := time.Now().Add(5 * time.Second); s.PeakConcurrent("c1", "availability") < 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	second := post(t, s, "c1", "availability", "second")
	if got := <-first; got != http.StatusOK || second.status != http.StatusOK {
		t.Fatalf("statuses %d and %d, want 200 and 200", got, second.status)
	}
	if took := time.Since(t0); took >= wait || s.PeakConcurrent("c1", "availability") != 2 {
		t.Fatalf("answered after %v with a peak of %d, want both answered once the second ran beside the first", took, s.PeakConcurrent("c1", "availability"))
	}
	t1 := time.Now()
	if r := post(t, s, "c1", "availability", "alone"); r.status != http.StatusOK || time.Since(t1) >= wait {
		t.Fatalf("a request alone after the gathering: %d after %v, want 200 at once", r.status, time.Since(t1))
	}
}
