package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// arrival is one request as its vendor met it: when, from the run's start
// once in a Report (off), and the job that sent it (its X-Job-Id: a
// lane's id, "@", its owner token, "b-…" for a bulk job's).
type arrival struct {
	at  time.Time
	off time.Duration
	job string
}

// addArrivals copies v's arrival log into r, from start, under v.mu.
func (r *Report) addArrivals(v *Vendor, start time.Time) {
	if v.Arrivals == nil {
		return
	}
	if r.Arrivals == nil {
		r.Arrivals = map[string][]arrival{}
	}
	for k, as := range v.Arrivals {
		out := make([]arrival, len(as))
		for i, a := range as {
			out[i] = arrival{at: a.at, off: a.at.Sub(start), job: a.job}
		}
		r.Arrivals[v.Name+"/"+k] = out
	}
}

// drainLoss is where the tokens live traffic left on the resync's buckets
// went, from the resync to each bucket's last bulk request, summed over
// the buckets: Left = rate × span − live requests, split into what bulk
// requests used and what was lost before a bucket's first bulk request
// (Start), while each of its lanes still had bulk work (Middle: gaps
// between bulk pushes), and from its first lane's last bulk request on
// (Tail: the lanes that finished no longer push).
type drainLoss struct {
	Buckets                         int
	Left, Bulk                      float64
	Start, Middle, Tail             float64
	StartSpan, MiddleSpan, TailSpan time.Duration // summed
	Lanes                           int           // summed
	// PerBucket is each bucket's bulk requests ÷ its tokens left, sorted.
	PerBucket []float64
}

// drainLossOf counts the loss over every bucket of arrivals that met a
// bulk request, each bucket at rate (requests a second) from the resync at.
func drainLossOf(arrivals map[string][]arrival, at time.Duration, rate float64) drainLoss {
	var d drainLoss
	for _, as := range arrivals {
		as = slices.Clone(as)
		slices.SortFunc(as, func(a, b arrival) int { return int(a.off - b.off) })
		lastOf := map[string]time.Duration{}
		first := time.Duration(-1)
		var last time.Duration
		for _, a := range as {
			lane, token, _ := strings.Cut(a.job, "@")
			if a.off < at || !strings.HasPrefix(token, "b-") {
				continue
			}
			if first < 0 {
				first = a.off
			}
			last = a.off
			lastOf[lane] = a.off
		}
		if first < 0 {
			continue
		}
		tail := last
		for _, t := range lastOf {
			tail = min(tail, t)
		}
		// Each stretch's tokens: rate × its length, less its live
		// requests; its loss: those less its bulk requests.
		edges := [4]time.Duration{at, first, tail, last}
		var left, bulk [3]float64
		for i := range 3 {
			left[i] = rate * (edges[i+1] - edges[i]).Seconds()
		}
		for _, a := range as {
			i := slices.IndexFunc(edges[1:], func(e time.Duration) bool { return a.off < e })
			if a.off == last {
				i = 2
			}
			if a.off < at || i < 0 {
				continue
			}
			if _, token, _ := strings.Cut(a.job, "@"); strings.HasPrefix(token, "b-") {
				bulk[i]++
			} else {
				left[i]--
			}
		}
		if l := left[0] + left[1] + left[2]; l > 0 {
			d.PerBucket = append(d.PerBucket, (bulk[0]+bulk[1]+bulk[2])/l)
		}
		d.Buckets++
		d.Lanes += len(lastOf)
		d.Left += left[0] + left[1] + left[2]
		d.Bulk += bulk[0] + bulk[1] + bulk[2]
		d.Start += left[0] - bulk[0]
		d.Middle += left[1] - bulk[1]
		d.Tail += left[2] - bulk[2]
		d.StartSpan += first - at
		d.MiddleSpan += tail - first
		d.TailSpan += last - tail
	}
	slices.Sort(d.PerBucket)
	return d
}

// write prints d as shares of the tokens left.
func (d drainLoss) write(w io.Writer) {
	if d.Buckets == 0 || d.Left <= 0 || len(d.PerBucket) == 0 {
		return
	}
	n := time.Duration(d.Buckets)
	pct := func(x float64) float64 { return 100 * x / d.Left }
	b := d.PerBucket
	fmt.Fprintf(w, "    at the vendors, bulk requests ÷ tokens live requests left, from the resync to a bucket's last bulk request, %d buckets (%.1f lanes each): %.1f%% in all (per bucket min %.0f%%, median %.0f%%, max %.0f%%); lost %.1f%% before the first bulk request (%v a bucket), %.1f%% while every lane had bulk work (%v), %.1f%% after the first lane's last (%v)\n",
		d.Buckets, float64(d.Lanes)/float64(d.Buckets), pct(d.Bulk), 100*b[0], 100*b[len(b)/2], 100*b[len(b)-1],
		pct(d.Start), ms(d.StartSpan/n), pct(d.Middle), ms(d.MiddleSpan/n), pct(d.Tail), ms(d.TailSpan/n))
}
