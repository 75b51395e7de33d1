package sim

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// progress prints, every FLEETBUCKET_SIM_PROGRESS of simulated time (a
// duration; unset: never), where a drain stands, and writes the lane trace
// so far if one is asked: a case that runs for hours of wall time shows
// whether it still drains or goes round in a loop, which its report
// (written only at the end) cannot.
type progress struct {
	every time.Duration
	start time.Time
	next  time.Time
	sites map[string]Site // the store's calls by site at the last line
}

func newProgress(start time.Time) *progress {
	d, err := time.ParseDuration(os.Getenv("FLEETBUCKET_SIM_PROGRESS"))
	if err != nil || d <= 0 {
		return nil
	}
	return &progress{every: d, start: start, next: start}
}

func (p *progress) log(s *sim) {
	if p == nil || time.Now().Before(p.next) {
		return
	}
	p.next = time.Now().Add(p.every)
	fmt.Fprintf(os.Stderr, "drain +%v: changes %d, deferred %d, dirty properties %d, busy %d, swept-listed %d\n",
		time.Since(p.start).Round(time.Second), s.sqs.Pending(s.changes), s.sqs.Pending(s.defers),
		len(s.ledger.DirtyByProp()), s.busy(), s.db.Listed("state", lane.SweepIndex))
	p.busiestSites(s.db.Stats())
	if s.lanes != nil && s.lanes.path != "" {
		// The lane trace so far: a run that never ends still leaves one.
		if err := s.lanes.write(s.ledger.slow.all(), s.ledger.channels); err != nil {
			fmt.Fprintf(os.Stderr, "  lane trace: %v\n", err)
		}
	}
	for _, v := range s.vendors {
		v.mu.Lock()
		fmt.Fprintf(os.Stderr, "  %s: sent %d, accepted %d, throttled %d, failed %d, refused %d\n", v.Name, v.Sent, v.Accepted, v.Throttled, v.Failed, v.Refused)
		v.mu.Unlock()
	}
}

// busiestSites prints the store's four busiest call sites since the last
// line: a drain that loops shows as one site's failed conditions.
func (p *progress) busiestSites(st DBStats) {
	type delta struct {
		site        string
		calls, cond int
	}
	var ds []delta
	for k, v := range st.Sites {
		was := p.sites[k]
		if d := (delta{k, v.Calls - was.Calls, v.Conditional - was.Conditional}); d.calls > 0 {
			ds = append(ds, d)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].calls > ds[j].calls })
	for _, d := range ds[:min(4, len(ds))] {
		fmt.Fprintf(os.Stderr, "  store %d calls (%d failed conditions): %s\n", d.calls, d.cond, d.site)
	}
	p.sites = map[string]Site{}
	for k, v := range st.Sites {
		p.sites[k] = *v
	}
}
