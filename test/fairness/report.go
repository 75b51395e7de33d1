package fairness

import (
	"fmt"
	"math"
	"strings"
)

// Markdown renders r as the fairness section of docs/bench/report.md. env
// describes the machine ("" leaves it out).
func (r *Result) Markdown(env string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## (f) Fairness across OS processes\n\n")
	p("%d separate worker processes × %d pushers each push for %s through `otapush.Client` (`otapush.DefaultPolicy`, `limiter.Wait`) on one bucket of rate %g/s and burst %d, against one mock OTA that enforces the same limit with its own sliding-window log (`sdk/limiter/limitertest/window`, no code in common with `sdk/gcra`). A deferred push waits its `DeferError.After` (as a job on the deferred queue would) before the pusher goes on. Pushes per process are counted by the vendor; DynamoDB requests by each process's own meter.",
		r.Config.Procs, r.Config.Pushers, r.Config.Duration, r.Config.Rate, r.Config.Burst)
	if r.Config.Margin != "" && r.Config.Margin != "0s" {
		p(" The bucket keeps a margin of %s (`limiter.Limit.Margin`); the vendor enforces burst + rate·W without it.", r.Config.Margin)
	}
	if env != "" {
		p(" Measured %s.", env)
	}
	p(" Re-run with `scripts/bench.sh` or `go run ./test/fairness/cmd/fairness`.\n\n")
	p("| pushes per process (vendor) | max ÷ min | accepted ÷ (burst + rate·T) | 429s | fullest window ÷ its bound: accepted pushes | requests sent | slots granted | DynamoDB requests / grant | of which: first `Wait` of each pusher, other `Wait`s (calls / grant) | conditional writes / grant | contended `Wait`s | exhausted `Wait`s | deferrals (longest) |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var contended, exhausted int64
	deferrals, longest := 0, int64(0)
	for _, w := range r.Workers {
		contended += w.Contended
		exhausted += w.Exhausted
		deferrals += w.Deferrals
		longest = max(longest, w.MaxDeferMillis)
	}
	counts := make([]string, len(r.PushesPerProcess))
	for i, n := range r.PushesPerProcess {
		counts[i] = fmt.Sprint(n)
	}
	util := 0.0
	if r.Allowed > 0 {
		util = float64(r.Accepted) / r.Allowed
	}
	p("| %s | %s | %.3f | %d | %s | %s | %s | %.2f | %.2f, %.2f | %.2f | %d | %d | %d (%.1f s) |\n\n",
		strings.Join(counts, ", "), ratio(r.MaxOverMin), util, r.Throttled,
		windowCell(r.Fullest), windowCell(r.FullestSent), windowCell(r.FullestSlots), r.RequestsPerGrant,
		r.ColdCallsPerGrant, r.SteadyCallsPerGrant, r.WritesPerGrant,
		contended, exhausted, deferrals, float64(longest)/1000)
	p("Latency from the grant to the request leaving `otapush` (ms, p50 / p99 / max): after its slot %s (n %d, min %.1f); after its grant's write returned, for grants due at once, %s (n %d).\n\n",
		latencyCell(r.FromSlot), r.FromSlot.N, r.FromSlot.Min, latencyCell(r.FromWrite), r.FromWrite.N)
	p("Target: max ÷ min ≤ 1.5, and no window of accepted pushes over burst + rate·W")
	if r.Broken {
		p(" — **broken in this run**")
	}
	p(". A window's bound is burst + rate·W for its width W; the fullest window of requests sent counts the refused ones too, and that of slots granted is the limiter's own view (each grant's `Reservation.Slot`, as the workers reported them), without the network between fleet and vendor. T runs from the first accepted push to the last; pushers start pushes for the run's duration, and a push started before its end runs to completion. Requests per grant (every attempt, by each process's meter) include each pusher's first `Wait`, made with its process's cache cold; the next column splits the limiter's calls between those first `Wait`s and all the others (steady state). *Contended* `Wait`s ended with `limiter.ErrContended` (retried at once by `otapush`), *exhausted* ones with a denial (a slot beyond the push's budget); each deferral is one push handed back, and its pusher waits its `After` (at most to the end of the run).\n")
	return b.String()
}

func ratio(v float64) string {
	if math.IsInf(v, 1) {
		return "∞ (a process made none)"
	}
	return fmt.Sprintf("%.2f", v)
}

func windowCell(w WindowReport) string {
	return fmt.Sprintf("%.3f (%d in %.0f ms, bound %.1f)", w.Ratio, w.Arrivals, w.WidthMS, w.Bound)
}

func latencyCell(l LatencyReport) string {
	return fmt.Sprintf("%.1f / %.1f / %.1f", l.P50, l.P99, l.Max)
}
