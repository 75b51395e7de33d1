package main

import "testing"

func TestInvocationsReadsTheCountTheTracedTestLogs(t *testing.T) {
	for _, c := range []struct {
		out  string
		want int
		ok   bool
	}{
		{"=== RUN   TestLaneJobPath\n    path_test.go:71: 2 invocations\n--- PASS", 2, true},
		{"    path_test.go:71: 3 invocations\n", 3, true},
		{"--- PASS: TestLaneJobPath (16.35s)\n", 0, false},
	} {
		n, err := invocations(c.out)
		if (err == nil) != c.ok || n != c.want {
			t.Errorf("invocations(%q) = %d, %v; want %d, ok %v", c.out, n, err, c.want, c.ok)
		}
	}
}
