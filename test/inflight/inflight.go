// Package inflight checks fleet-wide in-flight leases (limiter.LeaseGate)
// across separate OS processes against a vendor that counts its own
// concurrent requests.
//
// The vendor (Vendor) shares no code with the limiter: it counts requests
// whose handler is running (entered, not yet returned) with a mutex and an
// integer, and records each request's job id, process, lease slot and
// times. It keeps working on a request whose client went away, as a real
// vendor would, so a killed worker's request still counts until its
// handler returns.
//
// Run starts the vendor in the driver's process, a fresh table on the local
// stack, and the worker command once per process. Each worker process runs
// its pushers: Wait for a lease, POST one job, Release, until its run ends.
//
//	go test -run '^$' -bench BenchmarkLeaseThroughput -benchtime 1x ./test/inflight/
package inflight

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
)

// Request is one request as the vendor saw it.
type Request struct {
	Job      string
	Process  int
	Slot     int
	Owner    string
	Expires  time.Time // the lease's expiry, as the worker sent it
	Start    time.Time
	End      time.Time
	Inflight int // requests running when this one entered, itself included
}

// Vendor is the mock OTA: it answers every POST after Latency and keeps
// its own count of concurrent requests.
//
// With Gather set, a request is answered as soon as Gather requests have
// run at once since it entered, and after Latency at the latest. A test
// that the leases let Max pushes run together then checks that they did
// whatever the store's latency: a fleet whose leases allow fewer keeps
// every request for Latency and never reaches Gather.
type Vendor struct {
	Latency time.Duration
	Gather  int

	mu        sync.Mutex
	gathered  chan struct{} // closed when Gather requests run at once
	running   int
	runningBy map[int]int // running requests by process
	peak      int
	requests  []Request
	srv       *http.Server
	ln        net.Listener
}

// StartVendor listens on 127.0.0.1.
func StartVendor(latency time.Duration, gather int) (*Vendor, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	v := &Vendor{Latency: latency, Gather: gather, gathered: make(chan struct{}), ln: ln, runningBy: map[int]int{}}
	v.srv = &http.Server{Handler: http.HandlerFunc(v.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = v.srv.Serve(ln) }()
	return v, nil
}

// URL is where workers push.
func (v *Vendor) URL() string { return "http://" + v.ln.Addr().String() + "/push" }

// Close stops the vendor.
func (v *Vendor) Close() { _ = v.srv.Close() }

func (v *Vendor) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q := r.URL.Query()
	p, _ := strconv.Atoi(q.Get("process"))
	v.mu.Lock()
	v.running++
	v.runningBy[p]++
	inflight := v.running
	v.peak = max(v.peak, v.running)
	gathered := v.gathered
	if v.Gather > 0 && v.running >= v.Gather {
		close(v.gathered)
		v.gathered = make(chan struct{})
	}
	v.mu.Unlock()
	// The vendor works on, whether or not the client is still there.
	v.work(gathered)
	slot, _ := strconv.Atoi(q.Get("slot"))
	exp, _ := strconv.ParseInt(q.Get("expires"), 10, 64)
	v.mu.Lock()
	v.running--
	v.runningBy[p]--
	v.requests = append(v.requests, Request{Job: q.Get("job"), Process: p, Slot: slot, Owner: q.Get("owner"),
		Expires: time.UnixMicro(exp), Start: start, End: time.Now(), Inflight: inflight})
	v.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (v *Vendor) work(gathered <-chan struct{}) {
	if v.Gather == 0 {
		time.Sleep(v.Latency)
		return
	}
	t := time.NewTimer(v.Latency)
	defer t.Stop()
	select {
	case <-gathered:
	case <-t.C:
	}
}

// Peak is the most requests the vendor ever had running at once.
func (v *Vendor) Peak() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.peak
}

// busyAt says whether process p has a request running, and when it was
// asked: every such request entered before that time and ends after it.
func (v *Vendor) busyAt(p int) (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return time.Now(), v.runningBy[p] > 0
}

// Requests are the requests the vendor answered, by start.
func (v *Vendor) Requests() []Request {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := append([]Request(nil), v.requests...)
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Config is one run.
type Config struct {
	Procs, Pushers int
	Max            int
	Hold           time.Duration // the lease's hold (the crash bound)
	Timeout        time.Duration // the push's timeout (0: Hold)
	Latency        time.Duration // the vendor's
	Gather         int           // the vendor's (see Vendor)
	Duration       time.Duration
	// Worker is the command that runs WorkerMain; Env is added to its
	// environment.
	Worker []string
	Env    []string
	// Kill, if set, kills process 0 with SIGKILL this long after the start,
	// at the first moment after it when the vendor is running one of its
	// requests (so it holds a lease when it dies, however the others
	// raced it for the slots); process 0 starts Lead earlier than the
	// others.
	Kill, Lead time.Duration
	// Pipeline pushes through dispatch.Dispatcher (pipeline.go) rather
	// than the LeaseGate directly.
	Pipeline bool
}

// Result is what a run measured.
type Result struct {
	Requests []Request
	Peak     int
	// Duplicates are job ids the vendor saw more than once.
	Duplicates int
	// Throughput is requests completed per second between the first start
	// and the last end, Ideal is Max ÷ Latency.
	Throughput, Ideal float64
	// Utilization is the share of Max × time the vendor spent on requests
	// over the steady part of the run (a Latency after the first start to
	// a Latency before the last end): Throughput ÷ Ideal without the
	// start and the end.
	Utilization float64
	// Killed is when process 0 was killed (zero when not).
	Killed  time.Time
	Workers []WorkerReport
}

// Run runs the fleet once.
func Run(ctx context.Context, c Config) (*Result, error) {
	awsCfg, err := benchkit.Config(ctx)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(awsCfg, benchkit.ForEmulator)
	table, drop, err := benchkit.NewTable(ctx, db, "inflight")
	if err != nil {
		return nil, err
	}
	defer drop()
	v, err := StartVendor(c.Latency, c.Gather)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	start := time.Now().Add(2 * time.Second)
	key := fmt.Sprintf("inflight#%08x#availability", rand.Uint32())
	res := &Result{Workers: make([]WorkerReport, c.Procs)}
	errs := make([]error, c.Procs)
	var wg sync.WaitGroup
	for p := range c.Procs {
		f := workerFlags{process: p, pushers: c.Pushers, url: v.URL(), table: table, key: key, max: c.Max, hold: c.Hold, timeout: c.Timeout,
			start: start.Add(c.Lead).UnixMilli(), duration: c.Duration, pipeline: c.Pipeline}
		if p == 0 {
			f.start = start.UnixMilli()
			f.duration += c.Lead
		}
		cmd := exec.CommandContext(ctx, c.Worker[0], append(c.Worker[1:], f.args()...)...)
		cmd.Env = append(os.Environ(), c.Env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		if p == 0 && c.Kill > 0 {
			wg.Go(func() {
				res.Killed = killWhenBusy(v, start.Add(c.Kill), start.Add(c.Lead+c.Duration))
				_ = cmd.Process.Signal(syscall.SIGKILL)
			})
		}
		wg.Go(func() {
			err := cmd.Wait()
			if p == 0 && c.Kill > 0 {
				return // killed: no report
			}
			if err != nil {
				errs[p] = fmt.Errorf("worker %d: %v: %s", p, err, bytes.TrimSpace(stderr.Bytes()))
				return
			}
			errs[p] = lastJSON(&stdout, &res.Workers[p])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Let the vendor finish what a killed worker left running.
	time.Sleep(c.Latency + 100*time.Millisecond)
	res.Requests, res.Peak = v.Requests(), v.Peak()
	seen := map[string]int{}
	var first, last time.Time
	for _, r := range res.Requests {
		if seen[r.Job]++; seen[r.Job] == 2 {
			res.Duplicates++
		}
		if first.IsZero() || r.Start.Before(first) {
			first = r.Start
		}
		if r.End.After(last) {
			last = r.End
		}
	}
	if n := len(res.Requests); n > 0 {
		res.Throughput = float64(n) / last.Sub(first).Seconds()
	}
	res.Ideal = float64(c.Max) / c.Latency.Seconds()
	from, to := first.Add(c.Latency), last.Add(-c.Latency)
	if to.After(from) {
		var busy time.Duration
		for _, r := range res.Requests {
			if s, e := maxTime(r.Start, from), minTime(r.End, to); e.After(s) {
				busy += e.Sub(s)
			}
		}
		res.Utilization = busy.Seconds() / (float64(c.Max) * to.Sub(from).Seconds())
	}
	return res, nil
}

// killWhenBusy waits from `from` until the vendor is running a request of
// process 0, and says when it saw one; at `until` it gives up and says
// when (the run's check then finds no lease held at the kill).
func killWhenBusy(v *Vendor, from, until time.Time) time.Time {
	time.Sleep(time.Until(from))
	for {
		at, busy := v.busyAt(0)
		if busy || at.After(until) {
			return at
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func lastJSON(r io.Reader, into any) error {
	var last []byte
	for sc := bufio.NewScanner(r); sc.Scan(); {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			last = append(last[:0], line...)
		}
	}
	if err := json.Unmarshal(last, into); err != nil {
		return fmt.Errorf("report %q: %w", last, err)
	}
	return nil
}

// WorkerReport is what one worker process prints, one JSON line.
type WorkerReport struct {
	Process int `json:"process"`
	Pushes  int `json:"pushes"`
	// Busy are Waits that ended without a lease; Lost releases that found
	// the lease expired.
	Busy int `json:"busy"`
	Lost int `json:"lost"`
	// Writes are conditional writes sent (UpdateItem calls).
	Writes int64 `json:"writes"`
	// LeaseWrites are those of them on the lease item (the rest are the
	// pipeline's token writes).
	LeaseWrites int64 `json:"lease_writes"`
	// WriteMicros is the time spent in those writes, summed.
	WriteMicros int64  `json:"write_us"`
	Errors      int    `json:"errors"`
	FirstError  string `json:"first_error,omitempty"`
}

type workerFlags struct {
	process, pushers, max int
	url, table, key       string
	hold, timeout         time.Duration
	duration              time.Duration
	start                 int64
	pipeline              bool
}

func (f workerFlags) args() []string {
	return []string{"-process", fmt.Sprint(f.process), "-pushers", fmt.Sprint(f.pushers), "-url", f.url, "-table", f.table,
		"-key", f.key, "-max", fmt.Sprint(f.max), "-hold", f.hold.String(), "-timeout", f.timeout.String(), "-start", fmt.Sprint(f.start), "-duration", f.duration.String(),
		"-pipeline=" + strconv.FormatBool(f.pipeline)}
}

// counting counts the limiter's writes.
type counting struct {
	*dynamodb.Client
	writes, leaseWrites, micros atomic.Int64
}

func (c *counting) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.writes.Add(1)
	if pk, ok := in.Key[limiter.KeyAttribute].(*types.AttributeValueMemberS); ok && strings.HasSuffix(pk.Value, limiter.LeaseKey("")) {
		c.leaseWrites.Add(1)
	}
	start := time.Now()
	defer func() { c.micros.Add(time.Since(start).Microseconds()) }()
	return c.Client.UpdateItem(ctx, in, o...)
}

// WorkerMain runs one worker process and prints its report on stdout.
func WorkerMain(args []string, stdout, stderr io.Writer) int {
	var f workerFlags
	fs := flag.NewFlagSet("inflight-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.process, "process", 0, "")
	fs.IntVar(&f.pushers, "pushers", 1, "")
	fs.IntVar(&f.max, "max", 1, "")
	fs.StringVar(&f.url, "url", "", "")
	fs.StringVar(&f.table, "table", "", "")
	fs.StringVar(&f.key, "key", "", "")
	fs.DurationVar(&f.hold, "hold", time.Second, "")
	fs.DurationVar(&f.timeout, "timeout", 0, "")
	fs.DurationVar(&f.duration, "duration", time.Second, "")
	fs.Int64Var(&f.start, "start", 0, "")
	fs.BoolVar(&f.pipeline, "pipeline", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx := context.Background()
	awsCfg, err := benchkit.Config(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	db := &counting{Client: dynamodb.NewFromConfig(awsCfg, benchkit.ForEmulator)}
	l, err := limiter.New(db, limiter.WithTable(f.table))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	gate := limiter.NewLeaseGate(l)
	in := limiter.InFlight{Key: f.key, Max: f.max, Hold: f.hold, Timeout: f.timeout}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: f.pushers}}
	time.Sleep(time.Until(time.UnixMilli(f.start)))
	end := time.Now().Add(f.duration)
	var (
		mu  sync.Mutex
		rep = WorkerReport{Process: f.process}
	)
	note := func(fn func(*WorkerReport)) { mu.Lock(); fn(&rep); mu.Unlock() }
	if f.pipeline {
		if err := runPipeline(ctx, f, l, client, end, note); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		rep.Writes, rep.LeaseWrites, rep.WriteMicros = db.writes.Load(), db.leaseWrites.Load(), db.micros.Load()
		_ = json.NewEncoder(stdout).Encode(rep)
		return 0
	}
	var wg sync.WaitGroup
	for w := range f.pushers {
		wg.Go(func() {
			for n := 0; time.Now().Before(end); n++ {
				lease, err := gate.Wait(ctx, in, time.Until(end))
				if errors.Is(err, limiter.ErrExhausted) {
					note(func(r *WorkerReport) { r.Busy++ })
					continue
				}
				if err != nil {
					note(func(r *WorkerReport) { r.errorf(err) })
					time.Sleep(10 * time.Millisecond)
					continue
				}
				err = push(ctx, client, f.url, fmt.Sprintf("p%d-w%d-%d", f.process, w, n), f.process, lease, lease.Deadline(time.Now(), f.timeout))
				if err != nil {
					note(func(r *WorkerReport) { r.errorf(err) })
				} else {
					note(func(r *WorkerReport) { r.Pushes++ })
				}
				if err := gate.Release(ctx, lease); errors.Is(err, limiter.ErrLeaseLost) {
					note(func(r *WorkerReport) { r.Lost++ })
				} else if err != nil {
					note(func(r *WorkerReport) { r.errorf(err) })
				}
			}
		})
	}
	wg.Wait()
	rep.Writes, rep.LeaseWrites, rep.WriteMicros = db.writes.Load(), db.leaseWrites.Load(), db.micros.Load()
	_ = json.NewEncoder(stdout).Encode(rep)
	return 0
}

func (r *WorkerReport) errorf(err error) {
	r.Errors++
	if r.FirstError == "" {
		r.FirstError = err.Error()
	}
}

// push sends one job, ending by deadline (within the lease).
func push(ctx context.Context, client *http.Client, url, job string, process int, lease limiter.Lease, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	u := fmt.Sprintf("%s?job=%s&process=%d&slot=%d&owner=%s&expires=%d", url, job, process, lease.Slot, lease.Owner, lease.Expires.UnixMicro())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
