// Package vendoritems counts a push's items as a vendor that meters by
// items does: one a date, read from the body with a decoding of its own,
// so that a test's oracle shares no code with sdk/pipeline's rendering.
// It is for tests only; the SDK never imports it.
package vendoritems

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// Count is the number of dates a push body carries. A body that is not a
// push fails the test: the vendor could not have metered it.
func Count(t testing.TB, body []byte) int {
	t.Helper()
	var push struct {
		Items []struct {
			Days []json.RawMessage `json:"days"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &push); err != nil {
		t.Fatalf("push body %s: %v", body, err)
	}
	n := 0
	for _, it := range push.Items {
		n += len(it.Days)
	}
	return n
}

// Arrivals is the vendor's item counter: one arrival time per item of
// every request it metered (answered 2xx, 429 or failed on purpose), each
// at its request's arrival, for a window check of the items.
func Arrivals(t testing.TB, requests []mockota.Request) []time.Time {
	t.Helper()
	var at []time.Time
	for _, r := range requests {
		if !r.Metered {
			continue
		}
		for range Count(t, r.Body) {
			at = append(at, r.At)
		}
	}
	return at
}
