package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// A body over the dead-letter queue's limit becomes a reference that fits
// it, quotes and all, and says what the body was.
func TestReferenceFitsTheQueue(t *testing.T) {
	body := `{"items":[` + strings.Repeat(`{"date":"2027-01-01","v":"\"quoted\" é"},`, 20_000) + `{}]}`
	for _, limit := range []int{1024, 64 << 10, DefaultMaxMessageBytes} {
		ref, reason := Reference(body, "vendor refused the push with 400", limit)
		if n := messageBytes(ref, reason); n > limit {
			t.Errorf("limit %d: the reference takes %d bytes", limit, n)
		}
		var got struct {
			Bytes  int    `json:"bytes"`
			SHA256 string `json:"sha256"`
			Head   string `json:"head"`
		}
		if err := json.Unmarshal([]byte(ref), &got); err != nil {
			t.Fatalf("limit %d: reference %q is not JSON: %v", limit, ref[:min(len(ref), 100)], err)
		}
		sum := sha256.Sum256([]byte(body))
		if got.Bytes != len(body) || got.SHA256 != hex.EncodeToString(sum[:]) || !strings.HasPrefix(body, got.Head) || len(got.Head) == 0 {
			t.Errorf("limit %d: reference says %d bytes, sha256 %s, head of %d bytes; want the body's", limit, got.Bytes, got.SHA256, len(got.Head))
		}
		if !strings.Contains(reason, "vendor refused the push with 400") || !strings.Contains(reason, "over the dead-letter queue's") {
			t.Errorf("limit %d: reason %q", limit, reason)
		}
	}
}
