package fairness

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// The test binary is also the worker: Run starts it again with this
// variable set, so the smoke test needs no go build.
const workerEnv = "FLEETBUCKET_FAIRNESS_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		os.Exit(WorkerMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// A short run of the driver across real OS processes: 2 processes × 2
// pushers for 2 s. It asserts what holds at any speed: the vendor-side
// invariant (checked by package window, no sdk/gcra), every process served,
// no job accepted twice, and the counts adding up. Fairness ratios are the
// benchmark's to report, not a test's to time.
func TestDriverSmoke(t *testing.T) {
	emulator.Config(t) // skip without the local stack; fail under FLEETBUCKET_INTEGRATION=1
	c := Config{Procs: 2, Pushers: 2, Duration: 2 * time.Second, Rate: 20, Burst: 40, StartDelay: time.Second,
		Worker: []string{os.Args[0]}, Env: []string{workerEnv + "=1"}}
	r, err := Run(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Broken {
		t.Errorf("the vendor accepted more than burst + rate·W: %+v", r.Fullest)
	}
	for p, n := range r.PushesPerProcess {
		if n < 1 {
			t.Errorf("process %d made no push (%v)", p, r.PushesPerProcess)
		}
	}
	if r.Duplicates != 0 {
		t.Errorf("%d jobs accepted twice", r.Duplicates)
	}
	selfReported, grants := 0, int64(0)
	for _, w := range r.Workers {
		selfReported += w.Pushes
		grants += w.Grants
		if w.Requests < w.Grants {
			t.Errorf("process %d: %d DynamoDB requests for %d grants", w.Process, w.Requests, w.Grants)
		}
	}
	sum := 0
	for _, n := range r.PushesPerProcess {
		sum += n
	}
	if sum != r.Accepted || selfReported != r.Accepted || grants < int64(r.Accepted) {
		t.Errorf("vendor accepted %d (%d by process), workers report %d pushes and %d grants", r.Accepted, sum, selfReported, grants)
	}
	if r.Fullest.Arrivals < 1 || r.Fullest.Ratio > 1+1e-9 {
		t.Errorf("fullest window %+v", r.Fullest)
	}
	t.Logf("pushes per process %v, max ÷ min %.2f, 429s %d, fullest %+v, requests/grant %.2f",
		r.PushesPerProcess, r.MaxOverMin, r.Throttled, r.Fullest, r.RequestsPerGrant)
}

func TestProcessOf(t *testing.T) {
	for _, tc := range []struct {
		job  string
		p    int
		okay bool
	}{
		{"p0-w1-2", 0, true}, {"p12-w0-0", 12, true}, {"p-w1-2", 0, false}, {"x3-w1-2", 0, false}, {"p3", 0, false}, {"p-1-w0-0", 0, false},
	} {
		if p, ok := processOf(tc.job); p != tc.p || ok != tc.okay {
			t.Errorf("processOf(%q) = %d, %v; want %d, %v", tc.job, p, ok, tc.p, tc.okay)
		}
	}
}

func TestMaxOverMinAndReport(t *testing.T) {
	for _, tc := range []struct {
		xs   []int
		want float64
	}{
		{[]int{10, 15, 12}, 1.5}, {[]int{4, 0, 90}, math.Inf(1)}, {[]int{0, 0}, 0}, {nil, 0}, {[]int{7}, 1},
	} {
		if got := maxOverMin(tc.xs); got != tc.want {
			t.Errorf("maxOverMin(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	r := Result{PushesPerProcess: []int{4, 0, 90}, MaxOverMin: math.Inf(1), Allowed: 240, Broken: true}
	md := r.Markdown("")
	if !strings.Contains(md, "| 4, 0, 90 | ∞ (a process made none) |") || !strings.Contains(md, "broken in this run") {
		t.Errorf("report:\n%s", md)
	}
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"max_over_min":-1`) {
		t.Errorf("JSON %s, %v: want max_over_min -1 for ∞", b, err)
	}
}

// An OS-process fleet through otapush.Client at the default margin keeps
// every window at the vendor, counted at arrival: 8 processes × 5 pushers
// for 3 s on one bucket of 20/s, burst 40, margin 100 ms, against a vendor
// that enforces 20/s, burst 40 with its own sliding-window log (package
// window, no sdk/gcra). The run's start is the harshest part — 40 fresh
// pushers writing at once to a single-threaded emulator, whose answers come
// back hundreds of milliseconds after the now they claim — so a few
// seconds of pushing show a library that spends a grant later than its
// margin allows (issue 27, defect 7). The vendor must answer no 429 and no
// window of what the fleet sent may exceed burst + rate·W.
func TestFleetKeepsEveryWindowAtArrival(t *testing.T) {
	emulator.Config(t) // skip without the local stack; fail under FLEETBUCKET_INTEGRATION=1
	c := Config{Procs: 8, Pushers: 5, Duration: 3 * time.Second, Rate: 20, Burst: 40, Margin: 100 * time.Millisecond,
		StartDelay: 2 * time.Second, Worker: []string{os.Args[0]}, Env: []string{workerEnv + "=1"}}
	r, err := Run(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Throttled != 0 {
		t.Errorf("the vendor's window refused %d requests with 429, want 0", r.Throttled)
	}
	if r.FullestSent.Ratio > 1+1e-9 {
		t.Errorf("the fleet sent %d requests in %.1f ms, over the vendor's %.1f", r.FullestSent.Arrivals, r.FullestSent.WidthMS, r.FullestSent.Bound)
	}
	var deferrals, errs int
	var grants, unspent int64
	for _, w := range r.Workers {
		deferrals, errs, grants, unspent = deferrals+w.Deferrals, errs+w.Errors, grants+w.Grants, unspent+w.Unspent
	}
	if r.Accepted == 0 || int64(r.Accepted)+unspent < int64(c.Burst/2) {
		// Nothing sent keeps every window: a fleet that gave up on a slow
		// store would pass the checks above. A grant the store answers
		// later than the margin is left unspent on purpose, and on a
		// loaded machine most are (a CI run beside other work: 11 sent,
		// 113 left late), so what the fleet must show is that it kept
		// booking: half the burst, sent or left late, and one sent.
		t.Errorf("the vendor accepted %d pushes and %d grants were left late, want at least one sent and %d in all", r.Accepted, unspent, c.Burst/2)
	}
	t.Logf("accepted %d, 429s %d, fullest sent %+v, grants %d, left unspent late %d, deferrals %d, errors %d, from slot %+v",
		r.Accepted, r.Throttled, r.FullestSent, grants, unspent, deferrals, errs, r.FromSlot)
}
