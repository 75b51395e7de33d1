package integration

import (
	"encoding/json"
	"testing"
)

// itemsIn counts the dates a push body carries, as the vendor meters them,
// with its own decoding (not sdk/pipeline/syncer's).
func itemsIn(t *testing.T, body []byte) int {
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
