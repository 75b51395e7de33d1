package main

import (
	"strings"
	"testing"
)

func TestParseReadsBenchmarkLinesAndSkipsTheRest(t *testing.T) {
	out := `goos: linux
BenchmarkTakeUncontended-2   	     300	   4000 ns/op	         1.000 req/grant	         1.403 take/bare-latency
SDK 2026/11/30 08:20:51 WARN something
BenchmarkCommonApproach/workers=16/common-2   	1	12.25 RCU/grant	24.61 req/grant
PASS
`
	r := results{}
	if err := r.parse(strings.NewReader(out)); err != nil {
		t.Fatal(err)
	}
	if v, ok := r.get(latency, "take/bare-latency"); !ok || v != 1.403 {
		t.Errorf("take/bare-latency = %v, %v", v, ok)
	}
	if got := r.f(fleetComm, "req/grant", "%.1f"); got != "24.6" {
		t.Errorf("common req/grant = %q", got)
	}
	if got := r.f(fleetWait, "req/grant", "%.1f"); got != "n/a" {
		t.Errorf("a missing benchmark formats as %q, want n/a", got)
	}
	if got := r.ratio(fleetComm, "req/grant", fleetComm, "RCU/grant", "%.2f"); got != "2.01" {
		t.Errorf("ratio = %q", got)
	}
}

func TestParseRefusesAMalformedLine(t *testing.T) {
	r := results{}
	if err := r.parse(strings.NewReader("BenchmarkX-2 1 3.0 req/grant 4.0\n")); err == nil {
		t.Error("odd value/unit pairs accepted")
	}
}

func TestReportMarksMissingNumbers(t *testing.T) {
	md := report(results{}, nil, "", "", "", nil, "")
	if !strings.Contains(md, "| (d) | `Take` latency ÷ a bare UpdateItem, interleaved | n/a | — |") ||
		!strings.Contains(md, "max ÷ min, 429s, DynamoDB requests per grant | n/a | — |") ||
		!strings.Contains(md, "n/a (the fairness benchmark did not run)") {
		t.Errorf("missing numbers are not n/a:\n%s", md)
	}
}

func TestReportIncludesFairness(t *testing.T) {
	f := &fairnessResults{MaxOverMin: -1, Throttled: 3, RequestsPerGrant: 1.5, Broken: true}
	f.Config.Procs, f.Config.Pushers, f.Config.Duration = 8, 5, "10s"
	md := report(results{}, nil, "", "", "", f, "## (f) Fairness across OS processes\n\n| table |\n")
	for _, want := range []string{
		"| (f) | 8 processes × 5 pushers through `otapush` for 10s:",
		"| ∞ (a process made none), 3 429s, 1.50 requests/grant; **limit broken** | — |",
		"## (f) Fairness across OS processes\n\n| table |\n\n## Notes",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
