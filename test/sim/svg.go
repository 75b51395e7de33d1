package sim

import (
	"fmt"
	"strings"
	"time"
)

// SVG charts freshness (p50 and p99 per minute) against the quota-bound
// floor over the simulated time.
func (r *Report) SVG() string {
	const w, h, left, bottom, top, right = 720, 320, 60, 40, 30, 150
	type pt struct{ x, y float64 }
	var p50, p99, floor []pt
	maxY, maxX := 1.0, 1.0
	for m, hist := range r.FreshByMinute {
		if hist.N() == 0 {
			continue
		}
		x := float64(m) + 0.5
		p50 = append(p50, pt{x, hist.Quantile(0.5).Seconds()})
		p99 = append(p99, pt{x, hist.Quantile(0.99).Seconds()})
		maxY = max(maxY, hist.Quantile(0.99).Seconds())
		maxX = max(maxX, x+0.5)
	}
	for _, s := range r.Samples {
		floor = append(floor, pt{s.At.Minutes(), s.Floor.Seconds()})
		maxY = max(maxY, s.Floor.Seconds())
		maxX = max(maxX, s.At.Minutes())
	}
	sx := func(x float64) float64 { return left + x/maxX*(w-left-right) }
	sy := func(y float64) float64 { return h - bottom - y/maxY*(h-bottom-top) }
	line := func(pts []pt, color string) string {
		var b strings.Builder
		for i, p := range pts {
			if i == 0 {
				fmt.Fprintf(&b, "M%.1f,%.1f", sx(p.x), sy(p.y))
			} else {
				fmt.Fprintf(&b, " L%.1f,%.1f", sx(p.x), sy(p.y))
			}
		}
		return fmt.Sprintf(`<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, b.String(), color)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">sim %s (seed %d, simulated): change → OTA freshness vs the quota-bound floor</text>`, left, r.Scenario.Name, r.Scenario.Seed)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`, left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`, left, top, left, h-bottom)
	for i := 0; i <= 4; i++ {
		y := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, left-4, sy(y)+4, (time.Duration(y * float64(time.Second))).Round(10*time.Millisecond))
		x := maxX * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.1f min</text>`, sx(x), h-bottom+16, x)
	}
	b.WriteString(line(floor, "#999999"))
	b.WriteString(line(p50, "#1f77b4"))
	b.WriteString(line(p99, "#d62728"))
	for i, l := range []struct{ name, color string }{{"p50 freshness", "#1f77b4"}, {"p99 freshness", "#d62728"}, {"quota-bound floor", "#999999"}} {
		y := top + 10 + 18*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s</text>`, w-right+10, y, w-right+30, y, l.color, w-right+35, y+4, l.name)
	}
	b.WriteString(`</svg>` + "\n")
	return b.String()
}
