package main

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// Markdown is the results as a table, one row per run.
func (r *Results) Markdown() string {
	var b strings.Builder
	each := r.Quota / float64(r.Initial)
	fmt.Fprintf(&b, "| workers | limiters | sent/s after the first second | ÷ quota (%g/s) | accepted/s | 429s (after the first second) | requests sent | DynamoDB requests per token |\n", r.Quota)
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range r.Runs {
		name, perGrant := fmt.Sprintf("local: `x/time/rate`, %g/s each", each), "—"
		if run.Mode == modeShared {
			name, perGrant = "shared: fleetbucket `limiter.Wait`", fmt.Sprintf("%.2f", run.DynamoDBPerGrant)
		}
		fmt.Fprintf(&b, "| %d | %s | %.1f | %.2f | %.1f | %d (%d) | %d | %s |\n",
			run.Workers, name, run.SteadyRate, run.SteadyRate/r.Quota, run.SteadyAccepted, run.Throttled, run.SteadyThrottled, run.Sent, perGrant)
	}
	return b.String()
}

// Colours of the two approaches (ColorBrewer Dark2, safe for the common
// colour-vision deficiencies).
const (
	colourLocal  = "#d95f02"
	colourShared = "#1b9e77"
	colourQuota  = "#c0392b"
	font         = "DejaVu Sans, Helvetica, Arial, sans-serif"
)

// SVG draws the chart: grouped bars of the aggregate request rate against
// the quota line, and of the 429s, per worker count.
func (r *Results) SVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	const width, height = 980, 540
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">`+"\n", width, height, width, height, font)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	p(`<text x="28" y="38" font-size="21" font-weight="bold" fill="#222">%s</text>`+"\n",
		esc("Same workload, two ways: a local limiter per worker vs one shared bucket"))
	p(`<text x="28" y="62" font-size="13" fill="#555">%s</text>`+"\n",
		esc(fmt.Sprintf("Mock OTA quota %g req/s per credential (burst %d). Each run sends for %gs; rates exclude the first second (the burst).", r.Quota, r.Burst, r.Duration)))

	groups := r.workerCounts()
	rate := func(run Run) float64 { return run.SteadyRate }
	throttled := func(run Run) float64 { return float64(run.Throttled) }
	r.panel(p, panelBox{x0: 80, x1: 540, top: 112, base: 410}, "Requests sent per second, all workers together",
		groups, rate, r.Quota)
	r.panel(p, panelBox{x0: 650, x1: 940, top: 112, base: 410}, "429 responses, whole run",
		groups, throttled, -1)

	// Legend and the one-line method.
	ly := 470
	p(`<rect x="80" y="%d" width="16" height="16" fill="%s"/>`+"\n", ly-13, colourLocal)
	p(`<text x="104" y="%d" font-size="14" fill="#222">%s</text>`+"\n", ly, esc(fmt.Sprintf(
		"local: each worker paces itself with golang.org/x/time/rate at quota ÷ %d = %g req/s", r.Initial, r.Quota/float64(r.Initial))))
	p(`<rect x="80" y="%d" width="16" height="16" fill="%s"/>`+"\n", ly+15, colourShared)
	p(`<text x="104" y="%d" font-size="14" fill="#222">%s</text>`+"\n", ly+28, esc(
		"shared: every worker waits for a token of one fleetbucket bucket in DynamoDB (limiter.Wait)"))
	p(`<text x="28" y="%d" font-size="12" fill="#777">%s</text>`+"\n", height-12, esc(
		fmt.Sprintf("Limiters sized for %d workers. Measured on the local stack (moto, mock OTA); made by test/benchcompare/cmd/seedfigure.", r.Initial)))
	p("</svg>\n")
	return bw.Flush()
}

type panelBox struct{ x0, x1, top, base float64 }

// panel draws one bar chart: a group per worker count, a bar per mode. A
// non-negative quota draws the quota line.
func (r *Results) panel(p func(string, ...any), box panelBox, title string, groups []int, value func(Run) float64, quota float64) {
	top := math.Max(quota, 0)
	for _, run := range r.Runs {
		top = math.Max(top, value(run))
	}
	top, step := niceScale(top * 1.12)
	y := func(v float64) float64 { return box.base - (box.base-box.top)*v/top }

	p(`<text x="%.1f" y="%.1f" font-size="15" font-weight="bold" fill="#222">%s</text>`+"\n", box.x0, box.top-18, esc(title))
	for v := 0.0; v <= top+step/1000; v += step {
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e3e3e3"/>`+"\n", box.x0, y(v), box.x1, y(v))
		p(`<text x="%.1f" y="%.1f" font-size="12" fill="#555" text-anchor="end">%s</text>`+"\n", box.x0-8, y(v)+4, trimFloat(v))
	}
	p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", box.x0, box.base, box.x1, box.base)
	p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", box.x0, box.top, box.x0, box.base)

	groupW := (box.x1 - box.x0) / float64(len(groups))
	barW := math.Min(groupW*0.3, 70)
	for gi, n := range groups {
		cx := box.x0 + groupW*(float64(gi)+0.5)
		for mi, mode := range []string{modeLocal, modeShared} {
			run, ok := r.find(mode, n)
			if !ok {
				continue
			}
			colour := colourLocal
			if mode == modeShared {
				colour = colourShared
			}
			x := cx - barW - 3 + float64(mi)*(barW+6)
			v := value(run)
			h := box.base - y(v)
			label := fmt.Sprintf("%.0f", v)
			if quota > 0 && v >= 1.5*quota {
				label = fmt.Sprintf("%.0f = %.0f× quota", v, v/quota)
			}
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
				x, y(v), barW, h, colour, esc(fmt.Sprintf("%d workers, %s: %s", n, mode, label)))
			p(`<text x="%.1f" y="%.1f" font-size="13" fill="#222" text-anchor="middle">%s</text>`+"\n",
				x+barW/2, y(v)-6, esc(label))
		}
		p(`<text x="%.1f" y="%.1f" font-size="14" fill="#222" text-anchor="middle">%d workers</text>`+"\n", cx, box.base+22, n)
	}
	if quota >= 0 {
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="7 5"/>`+"\n",
			box.x0, y(quota), box.x1, y(quota), colourQuota)
		// Between the groups, where no bar or bar label can be.
		p(`<text x="%.1f" y="%.1f" font-size="13" fill="%s" text-anchor="middle" stroke="#ffffff" stroke-width="4" paint-order="stroke">%s</text>`+"\n",
			(box.x0+box.x1)/2, y(quota)-7, colourQuota, esc(fmt.Sprintf("quota %g req/s", quota)))
	}
}

func (r *Results) workerCounts() []int {
	var out []int
	seen := map[int]bool{}
	for _, run := range r.Runs {
		if !seen[run.Workers] {
			seen[run.Workers] = true
			out = append(out, run.Workers)
		}
	}
	return out
}

func (r *Results) find(mode string, workers int) (Run, bool) {
	for _, run := range r.Runs {
		if run.Mode == mode && run.Workers == workers {
			return run, true
		}
	}
	return Run{}, false
}

// niceScale rounds max up to a whole number of 1, 2, 2.5 or 5 × 10^k steps,
// at most six of them.
func niceScale(max float64) (top, step float64) {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return 1, 0.2
	}
	mag := math.Pow(10, math.Floor(math.Log10(max/5)))
	for _, m := range []float64{1, 2, 2.5, 5, 10, 20} {
		step = m * mag
		if max/step <= 6 {
			break
		}
	}
	return math.Ceil(max/step) * step, step
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
