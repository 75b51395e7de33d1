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
