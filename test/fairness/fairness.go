// Package fairness measures how evenly one shared bucket serves a fleet of
// separate OS processes, each with its own limiter cache and clock, pushing
// through otapush.Client to one mock OTA: the claim "every worker gets its
// share" is about a fleet, so it is measured across processes, not
// goroutines.
//
// Run starts the vendor in the driver's process (test/mockota, enforcing
// with its own sliding-window log, package window, which shares no code with
// sdk/gcra), creates a fresh limiter table on the local stack, and starts
// the worker command once per process with a common start time. Each worker
// runs its pushers until the end of the run and prints a WorkerReport (its
// own DynamoDB request counts) as JSON. Pushes per process are counted by
// the vendor, from the job ids it accepted.
//
//	go run ./test/fairness/cmd/fairness -procs 8 -pushers 5 -duration 10s
package fairness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// Config is one run.
type Config struct {
	Procs, Pushers int           // worker processes, pushers in each
	Duration       time.Duration // how long they push
	Rate           float64       // the bucket's (and the vendor's) limit
	Burst          int
	// Margin is the bucket's margin (limiter.Limit.Margin); the vendor
	// enforces burst + rate·W without it.
	Margin time.Duration
	// Worker is the command that runs one worker (WorkerMain): a path and
	// leading arguments, to which Run appends the worker's flags.
	Worker []string
	// Env is added to the workers' environment (which is the driver's).
	Env []string
	// StartDelay is how long after launching the processes they all start
	// pushing, so that a slow process start does not count against it.
	StartDelay time.Duration
	// Share, if its Fraction is set, gives the bucket leased shares (Quiet
	// unused: every process is of this release).
	Share gcra.Share
	// Churn staggers the processes: process p pushes from
	// p·Duration/(2·Procs) for Duration/2, so that more of them come and
	// go than push at once.
	Churn bool
	// Pause is how long each pusher waits after each push (0: none), for
	// the first Gentle of its process's run (0: all along).
	Pause, Gentle time.Duration
}

// DefaultConfig is the benchmark of issue 13: 8 processes × 5 pushers for
// 10 s on a bucket of rate 20/s, burst 40.
var DefaultConfig = Config{Procs: 8, Pushers: 5, Duration: 10 * time.Second, Rate: 20, Burst: 40, StartDelay: 2 * time.Second}

func (c Config) validate() error {
	switch {
	case c.Procs < 1 || c.Pushers < 1:
		return fmt.Errorf("fairness: %d processes × %d pushers, want ≥ 1 each", c.Procs, c.Pushers)
	case c.Duration < time.Second:
		return fmt.Errorf("fairness: duration %v, want ≥ 1s", c.Duration)
	case len(c.Worker) == 0:
		return errors.New("fairness: no worker command")
	case c.Margin < 0:
		return fmt.Errorf("fairness: margin %v, want ≥ 0", c.Margin)
	case c.StartDelay < 0:
		return fmt.Errorf("fairness: start delay %v, want ≥ 0", c.StartDelay)
	}
	return window.Limit{Rate: c.Rate, Burst: c.Burst}.Validate()
}

// Result is what a run measured.
type Result struct {
	Config struct {
		Procs, Pushers int
		Duration       string
		Rate           float64
		Burst          int
		Margin         string
	} `json:"config"`
	// PushesPerProcess counts, per process, the pushes the vendor accepted
	// (by the job ids' process prefix).
	PushesPerProcess []int `json:"pushes_per_process"`
	// MaxOverMin is max ÷ min of PushesPerProcess (+Inf, written as -1 in
	// JSON, when a process made none).
	MaxOverMin float64 `json:"max_over_min"`
	Accepted   int     `json:"accepted"`
	Throttled  int     `json:"throttled_429"`
	// Allowed is burst + rate·T, what the limit allows over the span T from
	// the first accepted push to the last.
	Allowed float64 `json:"allowed"`
	// Fullest is the fullest window of accepted arrivals, FullestSent of
	// everything sent; Broken says whether the accepted one broke the limit.
	Fullest     WindowReport `json:"fullest_window"`
	FullestSent WindowReport `json:"fullest_window_sent"`
	// FullestSlots is the fullest window of the slots the limiter granted,
	// as the workers reported them: the fleet's own view, without the
	// network between it and the vendor.
	FullestSlots WindowReport `json:"fullest_window_slots"`
	Broken       bool         `json:"broken"`
	// Duplicates are job ids accepted more than once.
	Duplicates int `json:"duplicates"`
	// RequestsPerGrant is the fleet's DynamoDB requests ÷ tokens granted,
	// from the workers' own counts; WritesPerGrant the conditional writes.
	RequestsPerGrant float64 `json:"dynamodb_requests_per_grant"`
	WritesPerGrant   float64 `json:"dynamodb_writes_per_grant"`
	// ColdCallsPerGrant is the limiter's calls per grant in each pusher's
	// first Wait (its process's cache cold), SteadyCallsPerGrant in all the
	// others.
	// FromSlot is how long after its slot each request left otapush, and
	// FromWrite how long after its grant's write returned (grants due at
	// once): the jitter a margin covers.
	FromSlot            LatencyReport  `json:"from_slot"`
	FromWrite           LatencyReport  `json:"from_write"`
	ColdCallsPerGrant   float64        `json:"cold_calls_per_grant"`
	SteadyCallsPerGrant float64        `json:"steady_calls_per_grant"`
	Workers             []WorkerReport `json:"workers"`
}

// WindowReport is a window.Window for JSON.
type WindowReport struct {
	Arrivals int     `json:"arrivals"`
	WidthMS  float64 `json:"width_ms"`
	Bound    float64 `json:"bound"`
	Ratio    float64 `json:"ratio"`
}

func windowReport(w window.Window) WindowReport {
	return WindowReport{Arrivals: w.Arrivals, WidthMS: float64(w.Width().Microseconds()) / 1000, Bound: w.Bound, Ratio: w.Ratio()}
}

const credential = "fairness"

// Run runs the benchmark on the local stack (the AWS_ENDPOINT_URL_*
// environment, which the workers inherit).
func Run(ctx context.Context, c Config) (*Result, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	awsCfg, err := benchkit.Config(ctx)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(awsCfg, benchkit.ForEmulator)
	table, drop, err := benchkit.NewTable(ctx, db, "fairness")
	if err != nil {
		return nil, err
	}
	defer drop()
	ota, err := mockota.Start(mockota.Config{Limit: gcra.Limit{Rate: c.Rate, Burst: c.Burst}, Enforce: mockota.EnforceWindow, Credentials: []string{credential}})
	if err != nil {
		return nil, err
	}
	defer ota.Close()

	wf := workerFlags{pushers: c.Pushers, ota: ota.URL(), table: table, key: fmt.Sprintf("fairness#%08x#availability", rand.Uint32()),
		credential: credential, rate: c.Rate, burst: c.Burst, margin: c.Margin, start: time.Now().Add(c.StartDelay).UnixMilli(), duration: c.Duration,
		shareFraction: c.Share.Fraction, shareLeases: c.Share.Leases, shareEpoch: c.Share.Epoch, pause: c.Pause, gentle: c.Gentle}
	reports := make([]WorkerReport, c.Procs)
	errs := make([]error, c.Procs)
	var wg sync.WaitGroup
	for p := range c.Procs {
		f := wf
		f.process = p
		if c.Churn {
			f.offset, f.life = time.Duration(p)*c.Duration/time.Duration(2*c.Procs), c.Duration/2
		}
		wg.Go(func() { reports[p], errs[p] = runProcess(ctx, c.Worker, c.Env, f) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return measure(c, ota, reports), nil
}

// runProcess starts one worker process and reads its report. The process
// is killed (by its PID, through exec.CommandContext) if ctx ends first.
func runProcess(ctx context.Context, worker, env []string, f workerFlags) (WorkerReport, error) {
	pctx, cancel := context.WithTimeout(ctx, time.Until(time.UnixMilli(f.start))+f.duration+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(pctx, worker[0], append(worker[1:], f.args()...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Run(); err != nil {
		return WorkerReport{}, fmt.Errorf("worker %d: %v: %s", f.process, err, strings.TrimSpace(stderr.String()))
	}
	var rep WorkerReport
	var last []byte
	for sc := bufio.NewScanner(&stdout); sc.Scan(); {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			last = append(last[:0], line...)
		}
	}
	if err := json.Unmarshal(last, &rep); err != nil {
		return rep, fmt.Errorf("worker %d: report %q: %w", f.process, last, err)
	}
	return rep, nil
}

// measure reads the vendor's recording and the workers' reports.
func measure(c Config, ota *mockota.Server, reports []WorkerReport) *Result {
	r := &Result{PushesPerProcess: make([]int, c.Procs), Workers: reports}
	r.Config.Procs, r.Config.Pushers, r.Config.Duration, r.Config.Rate, r.Config.Burst = c.Procs, c.Pushers, c.Duration.String(), c.Rate, c.Burst
	r.Config.Margin = c.Margin.String()
	for job, n := range ota.AcceptedByJob() {
		r.Accepted += n
		if n > 1 {
			r.Duplicates++
		}
		if p, ok := processOf(job); ok && p < c.Procs {
			r.PushesPerProcess[p] += n
		}
	}
	r.MaxOverMin = maxOverMin(r.PushesPerProcess)
	r.Throttled = ota.Count429()
	lim := window.Limit{Rate: c.Rate, Burst: c.Burst}
	if ts := ota.AcceptedTimes(credential, "availability"); len(ts) > 0 {
		r.Allowed = lim.Bound(ts[len(ts)-1].Sub(ts[0]))
	}
	full, broken := ota.FullestWindow(credential, "availability")
	sent, _ := ota.FullestWindowSent(credential, "availability")
	r.Fullest, r.FullestSent, r.Broken = windowReport(full), windowReport(sent), broken
	var requests, writes, grants, calls, coldCalls, coldGrants int64
	var slots []time.Time
	var fromSlot, fromWrite []int64
	for _, w := range reports {
		fromSlot = append(fromSlot, w.FromSlotMicros...)
		fromWrite = append(fromWrite, w.FromWriteMicros...)
		requests += w.Requests
		writes += w.Writes
		grants += w.Grants
		calls += w.Calls
		coldCalls += w.ColdCalls
		coldGrants += w.ColdGrants
		for _, us := range w.Slots {
			slots = append(slots, time.UnixMicro(us))
		}
	}
	r.FromSlot, r.FromWrite = latencyReport(fromSlot), latencyReport(fromWrite)
	fs, _ := window.Fullest(slots, lim)
	r.FullestSlots = windowReport(fs)
	if grants > 0 {
		r.RequestsPerGrant = float64(requests) / float64(grants)
		r.WritesPerGrant = float64(writes) / float64(grants)
	}
	if coldGrants > 0 {
		r.ColdCallsPerGrant = float64(coldCalls) / float64(coldGrants)
	}
	if grants > coldGrants {
		r.SteadyCallsPerGrant = float64(calls-coldCalls) / float64(grants-coldGrants)
	}
	return r
}

// processOf reads p from a job id "p<p>-w<pusher>-<n>".
func processOf(job string) (int, bool) {
	head, _, ok := strings.Cut(job, "-")
	if !ok || !strings.HasPrefix(head, "p") {
		return 0, false
	}
	p, err := strconv.Atoi(head[1:])
	return p, err == nil && p >= 0
}

// maxOverMin is max ÷ min, +Inf when the least served got nothing (and 0
// when nobody did).
func maxOverMin(xs []int) float64 {
	if len(xs) == 0 {
		return 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	switch {
	case hi == 0:
		return 0
	case lo == 0:
		return math.Inf(1)
	}
	return float64(hi) / float64(lo)
}

// MarshalJSON writes +Inf as -1, which JSON can hold.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	p := plain(r)
	if math.IsInf(p.MaxOverMin, 1) {
		p.MaxOverMin = -1
	}
	return json.Marshal(p)
}
