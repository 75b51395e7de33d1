package mockota

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// A vendor lowers its limit without notice, then raises it back: requests
// every 50 ms (20/s, the published limit) are cut to the hidden 10/s while
// it holds, and all accepted again once it is lifted.
func TestSetHiddenWindowAtRuntime(t *testing.T) {
	s, c := start(t, Config{Limit: gcra.Limit{Rate: 20, Burst: 20}})
	accepted := func(n int, tag string) int {
		ok := 0
		for i := range n {
			r := post(t, s, "cred", "rates", fmt.Sprint(tag, i))
			switch r.status {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				if r.header.Get("Retry-After") == "" {
					t.Fatal("a hidden refusal without Retry-After")
				}
			default:
				t.Fatalf("status %d", r.status)
			}
			c.Advance(50 * time.Millisecond)
		}
		return ok
	}
	if got := accepted(40, "open"); got != 40 {
		t.Fatalf("%d of 40 accepted with no hidden limit, want 40", got)
	}
	if err := s.SetHiddenWindow(&window.Limit{Rate: 10, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	// 2 s at 20/s against 10/s burst 2: the burst, then every other one.
	if got := accepted(40, "hidden"); got < 20 || got > 22 {
		t.Fatalf("%d of 40 accepted under a hidden 10/s, want 20-22", got)
	}
	if err := s.SetHiddenWindow(nil); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second) // the published bucket refills
	if got := accepted(40, "raised"); got != 40 {
		t.Fatalf("%d of 40 accepted after the limit was raised back, want 40", got)
	}
	if err := s.SetHiddenWindow(&window.Limit{Rate: 0, Burst: 1}); err == nil {
		t.Fatal("a hidden window of rate 0 was accepted")
	}
}

func TestSetHiddenWindowNeedsGCRA(t *testing.T) {
	s, _ := start(t, Config{Limit: gcra.Limit{Rate: 20, Burst: 20}, Enforce: EnforceWindow})
	if err := s.SetHiddenWindow(&window.Limit{Rate: 1, Burst: 1}); err == nil {
		t.Fatal("SetHiddenWindow accepted under EnforceWindow")
	}
}
