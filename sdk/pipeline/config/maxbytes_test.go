package config

import (
	"fmt"
	"strings"
	"testing"
)

// max_bytes is bounded by what the dead-letter path can carry: an SQS
// message holds at most 1 MiB, and a refused push goes there.
func TestMaxBytesFitsADeadLetter(t *testing.T) {
	config := func(maxBytes int) string {
		return fmt.Sprintf(`{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":1,"burst":1},"max_bytes":%d}},"credentials":{"c1":{"token_env":"T"}}}}}`, maxBytes)
	}
	for _, tt := range []struct {
		maxBytes int
		ok       bool
	}{{1024, true}, {1 << 20, true}, {1<<20 + 1, false}, {64 << 20, false}} {
		_, err := Parse([]byte(config(tt.maxBytes)))
		if tt.ok && err != nil {
			t.Errorf("max_bytes %d refused: %v", tt.maxBytes, err)
		}
		if !tt.ok && (err == nil || !strings.Contains(err.Error(), "dead-letter queue")) {
			t.Errorf("max_bytes %d: %v, want it refused, saying why", tt.maxBytes, err)
		}
	}
}
