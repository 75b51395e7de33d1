// Command adaptive runs the "hidden limit at half the configured rate"
// benchmark on the local stack: three fleets push at once, each to its own
// mock OTA that publishes the configured limit (20/s) but enforces a hidden
// one of half that, with its own sliding-window log (no sdk/gcra), and
// raises it back to the configured limit halfway through:
//
//   - fleetbucket adaptive: one shared bucket that learns the limit
//     (connections' "adaptive" defaults unless flags say otherwise);
//   - fleetbucket penalize-only: the shared bucket at the configured rate,
//     a 429 empties it until Retry-After (before adaptive buckets);
//   - per-process adaptive: each worker paces itself at its share of the
//     configured rate and adapts alone, AWS SDK adaptive-retry style
//     (CUBIC: ×0.7 on a 429, cubic recovery, floor 0.5/s).
//
// Every worker has its own DynamoDB client and limiter, as a process would.
// The figures come from the vendors' records, counted here.
//
//	eval "$(scripts/localstack.sh start)"
//	go run ./test/bench/cmd/adaptive -hidden 60s -raised 60s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/internal/ctxsleep"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/test/bench/benchkit"
	"github.com/fleetbucket/fleetbucket/test/dynamotest"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"golang.org/x/time/rate"
)

type benchConfig struct {
	Workers      int           `json:"workers"`
	Rate         float64       `json:"configured_rate"`
	Burst        int           `json:"configured_burst"`
	HiddenBurst  int           `json:"hidden_burst"`
	Hidden       time.Duration `json:"hidden_phase"`
	Raised       time.Duration `json:"raised_phase"`
	Settle       time.Duration `json:"settle"`
	Quiet        time.Duration `json:"quiet"`
	Increase     float64       `json:"increase"`
	MinRate      float64       `json:"min_rate"`
	ProcessFloor float64       `json:"process_floor"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := benchConfig{Workers: 8, Rate: 20, Burst: 20, HiddenBurst: 5, Hidden: 60 * time.Second, Raised: 60 * time.Second,
		Settle: 10 * time.Second, ProcessFloor: 0.5}
	var jsonOut, env string
	var quietSeconds float64
	fs := flag.NewFlagSet("adaptive", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.Workers, "workers", c.Workers, "workers in each fleet")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "the configured (and published) rate per second")
	fs.IntVar(&c.Burst, "burst", c.Burst, "the configured burst")
	fs.IntVar(&c.HiddenBurst, "hidden-burst", c.HiddenBurst, "the hidden limit's burst (its rate is half the configured one)")
	fs.DurationVar(&c.Hidden, "hidden", c.Hidden, "how long the vendor enforces the hidden limit")
	fs.DurationVar(&c.Raised, "raised", c.Raised, "how long after it raises the limit back the run lasts")
	fs.Float64Var(&quietSeconds, "quiet", 0, "the adaptive bucket's quiet period in seconds (0: the connections default)")
	fs.Float64Var(&c.Increase, "increase", 0, "the adaptive bucket's climb, tokens/s per second (0: the connections default)")
	fs.StringVar(&jsonOut, "json", "", "also write the result as JSON to this file")
	fs.StringVar(&env, "env", "", "a line describing the machine, for the report")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || c.Workers < 1 || c.Hidden <= c.Settle || c.Raised < 10*time.Second {
		fmt.Fprintln(stderr, "adaptive: want -workers ≥ 1, -hidden > 10s, -raised ≥ 10s and no arguments")
		return 2
	}
	// The bucket the connections file would give an endpoint with
	// "adaptive": {} and this limit, or the flags' overrides.
	spec := config.AdaptiveSpec{QuietSeconds: quietSeconds, Increase: c.Increase}
	ad := config.Endpoint{Limit: config.LimitSpec{Rate: c.Rate, Burst: c.Burst}, Adaptive: &spec}.AdaptiveLimit()
	c.Quiet, c.Increase, c.MinRate = ad.Quiet, ad.Increase, ad.MinRate
	res, err := bench(ctx, c, ad, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "adaptive: %v\n", err)
		return 1
	}
	fmt.Fprint(stdout, markdown(c, res, env))
	if jsonOut != "" {
		b, err := json.MarshalIndent(map[string]any{"config": c, "results": res}, "", "  ")
		if err == nil {
			err = os.WriteFile(jsonOut, append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "adaptive: %v\n", err)
			return 1
		}
	}
	return 0
}

// fleet is one of the three contenders.
type fleet struct {
	name  string
	srv   *mockota.Server
	calls *atomic.Int64 // DynamoDB calls, nil for local pacing
	reads *atomic.Int64 // of which reads (confirming probing slots)
	work  func(ctx context.Context, i int)
}

func bench(ctx context.Context, c benchConfig, ad *limiter.Adaptive, log io.Writer) ([]result, error) {
	awsCfg, err := benchkit.Config(ctx)
	if err != nil {
		return nil, err
	}
	table, drop, err := benchkit.NewTable(ctx, dynamodb.NewFromConfig(awsCfg, benchkit.ForEmulator), "adaptive")
	if err != nil {
		return nil, err
	}
	defer drop()
	newVendor := func() (*mockota.Server, error) {
		s, err := mockota.Start(mockota.Config{Limit: gcra.Limit{Rate: c.Rate, Burst: c.Burst}})
		if err != nil {
			return nil, err
		}
		return s, s.SetHiddenWindow(&window.Limit{Rate: c.Rate / 2, Burst: c.HiddenBurst})
	}
	// A fleetbucket worker: its own client, limiter and push client.
	fleetWorker := func(s *mockota.Server, b limiter.Bucket, calls, reads *atomic.Int64) func(context.Context, int) {
		return func(ctx context.Context, i int) {
			counter := &dynamotest.Counter{DB: dynamodb.NewFromConfig(awsCfg, benchkit.ForEmulator)}
			defer func() {
				calls.Add(counter.Calls())
				reads.Add(counter.Calls() - counter.Updates())
			}()
			lim, err := limiter.New(counter, limiter.WithTable(table))
			if err != nil {
				panic(err)
			}
			push, err := otapush.New(&http.Client{Timeout: 10 * time.Second}, lim, otapush.DefaultPolicy,
				otapush.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				panic(err)
			}
			for n := 0; ctx.Err() == nil; n++ {
				_, err := push.Push(ctx, otapush.Request{Bucket: b, URL: s.URL() + "/v1/rates", JobID: fmt.Sprintf("w%d-%d", i, n),
					Body: []byte(`{"hotel_ref":"H1"}`), Header: http.Header{"Authorization": {"Bearer cred"}}})
				var later *otapush.DeferError
				if asDefer(err, &later) {
					_ = ctxsleep.Sleep(ctx, max(later.After, 100*time.Millisecond))
				}
			}
		}
	}
	var fleets []*fleet
	for _, f := range []struct {
		name     string
		adaptive *limiter.Adaptive
	}{{"fleetbucket adaptive", ad}, {"fleetbucket penalize-only", nil}} {
		s, err := newVendor()
		if err != nil {
			return nil, err
		}
		defer s.Close()
		calls, reads := &atomic.Int64{}, &atomic.Int64{}
		b := limiter.Bucket{Key: "bench#cred#" + strings.ReplaceAll(f.name, " ", "-"), Limit: limiter.PerSecond(c.Rate, c.Burst), Adaptive: f.adaptive}
		fleets = append(fleets, &fleet{name: f.name, srv: s, calls: calls, reads: reads, work: fleetWorker(s, b, calls, reads)})
	}
	s, err := newVendor()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	fleets = append(fleets, &fleet{name: "per-process adaptive (CUBIC ×0.7)", srv: s, work: func(ctx context.Context, i int) {
		cubicWorker(ctx, s.URL()+"/v1/rates", i, c.Rate/float64(c.Workers), c.ProcessFloor)
	}})

	t0 := time.Now().Add(500 * time.Millisecond)
	end := t0.Add(c.Hidden + c.Raised)
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var wg sync.WaitGroup
	for _, f := range fleets {
		for i := range c.Workers {
			wg.Go(func() {
				if ctxsleep.Sleep(runCtx, time.Until(t0)) == nil {
					f.work(runCtx, i)
				}
			})
		}
	}
	fmt.Fprintf(log, "adaptive: %d workers per fleet; hidden limit %.3g/s for %v, then raised to %.3g/s for %v\n",
		c.Workers, c.Rate/2, c.Hidden, c.Rate, c.Raised)
	if ctxsleep.Sleep(runCtx, time.Until(t0.Add(c.Hidden))) == nil {
		for _, f := range fleets {
			if err := f.srv.SetHiddenWindow(nil); err != nil {
				return nil, err
			}
		}
		fmt.Fprintln(log, "adaptive: the vendors raised their limit back")
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]result, len(fleets))
	for i, f := range fleets {
		var calls, reads int64 = -1, -1
		if f.calls != nil {
			calls, reads = f.calls.Load(), f.reads.Load()
		}
		out[i] = analyze(f.name, f.srv.Requests(), t0, c, calls, reads)
	}
	return out, nil
}

func asDefer(err error, target **otapush.DeferError) bool {
	if err == nil {
		return false
	}
	d, ok := err.(*otapush.DeferError)
	*target = d
	return ok
}

// cubicWorker is a process that paces itself and adapts alone, as the AWS
// SDK's adaptive retry mode does: on a throttle its rate drops to 0.7× and
// then follows W(t) = C·(t − K)³ + Wmax, K = ∛(Wmax·(1 − β)/C), C = 0.4,
// capped at its configured share; it honours Retry-After.
func cubicWorker(ctx context.Context, url string, i int, share, floor float64) {
	const beta, c = 0.7, 0.4
	hc := &http.Client{Timeout: 10 * time.Second}
	lim := rate.NewLimiter(rate.Limit(share), 1)
	wmax, last := share, time.Time{}
	for n := 0; ctx.Err() == nil; n++ {
		if !last.IsZero() {
			k := math.Cbrt(wmax * (1 - beta) / c)
			t := time.Since(last).Seconds()
			lim.SetLimit(rate.Limit(min(max(c*math.Pow(t-k, 3)+wmax, floor), share)))
		}
		if lim.Wait(ctx) != nil {
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"hotel_ref":"H1"}`))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer cred")
		req.Header.Set("X-Job-Id", fmt.Sprintf("p%d-%d", i, n))
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			wmax, last = float64(lim.Limit()), time.Now()
			lim.SetLimit(rate.Limit(max(wmax*beta, floor)))
			if wait, err := otapush.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); err == nil {
				_ = ctxsleep.Sleep(ctx, min(wait, 5*time.Second))
			}
		}
	}
}

// result is one fleet's figures, counted from its vendor's record.
type result struct {
	Name string `json:"name"`
	// Hidden phase.
	Throttled429First   int     `json:"throttled_first_10s"`
	Last429First        float64 `json:"last_429_in_first_10s_s"` // -1: none
	Throttled429Settled int     `json:"throttled_after_10s"`
	PerMinuteSettled    float64 `json:"throttled_per_minute_after_10s"`
	AcceptedOfHidden    float64 `json:"accepted_of_hidden_after_10s"`
	// Raised phase.
	FoundAfter       float64 `json:"found_raised_limit_after_s"` // -1: never
	Throttled429Up   int     `json:"throttled_after_raise"`
	AcceptedOfRaised float64 `json:"accepted_of_raised_last_20s"`
	// Cost.
	Accepted     int     `json:"accepted"`
	Sent         int     `json:"sent"`
	CallsPerPush float64 `json:"dynamodb_calls_per_accepted"` // -1: no store
	ReadsPerPush float64 `json:"dynamodb_reads_per_accepted"` // of the calls; -1: no store
	Timeline     []int   `json:"accepted_per_5s"`
	Throttled    []int   `json:"throttled_per_5s"`
}

func analyze(name string, reqs []mockota.Request, t0 time.Time, c benchConfig, calls, reads int64) result {
	r := result{Name: name, Last429First: -1, FoundAfter: -1, CallsPerPush: -1, ReadsPerPush: -1}
	hidden, total := c.Hidden.Seconds(), (c.Hidden + c.Raised).Seconds()
	settle := c.Settle.Seconds()
	var accepted []float64
	r.Timeline = make([]int, int(math.Ceil(total/5)))
	r.Throttled = make([]int, len(r.Timeline))
	for _, q := range reqs {
		if !q.Metered {
			continue
		}
		t := q.At.Sub(t0).Seconds()
		r.Sent++
		if b := int(t / 5); q.Status == http.StatusTooManyRequests && b >= 0 && b < len(r.Throttled) {
			r.Throttled[b]++
		}
		switch {
		case q.Status == http.StatusTooManyRequests && t < settle:
			r.Throttled429First++
			r.Last429First = max(r.Last429First, t)
		case q.Status == http.StatusTooManyRequests && t < hidden:
			r.Throttled429Settled++
		case q.Status == http.StatusTooManyRequests:
			r.Throttled429Up++
		case q.Status == http.StatusOK:
			r.Accepted++
			accepted = append(accepted, t)
			if b := int(t / 5); b >= 0 && b < len(r.Timeline) {
				r.Timeline[b]++
			}
		}
	}
	r.PerMinuteSettled = float64(r.Throttled429Settled) / (hidden - settle) * 60
	count := func(from, to float64) int {
		n := 0
		for _, t := range accepted {
			if t >= from && t < to {
				n++
			}
		}
		return n
	}
	r.AcceptedOfHidden = float64(count(settle, hidden)) / ((hidden - settle) * c.Rate / 2)
	r.AcceptedOfRaised = float64(count(total-20, total)) / (20 * c.Rate)
	// Found: the first 5 s window after the raise holding 90% of the
	// raised limit, reported by the window's end.
	for end := hidden + 5; end <= total; end += 0.25 {
		if float64(count(end-5, end)) >= 0.9*c.Rate*5 {
			r.FoundAfter = end - hidden
			break
		}
	}
	if calls >= 0 && r.Accepted > 0 {
		r.CallsPerPush = float64(calls) / float64(r.Accepted)
		r.ReadsPerPush = float64(reads) / float64(r.Accepted)
	}
	return r
}

func markdown(c benchConfig, res []result, env string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## (h) Hidden limit at half the configured rate, then raised back (`scripts/bench.sh -a`)\n\n")
	if env != "" {
		fmt.Fprintf(&b, "Measured %s.\n\n", env)
	}
	fmt.Fprintf(&b, "Three fleets of %d workers push at once, each to its own mock OTA that publishes %.3g/s burst %d and enforces a hidden %.3g/s burst %d (its own sliding-window log) for %v, then raises it back to %.3g/s for %v. Adaptive bucket: min rate %.3g/s, quiet %v, climb %.3g/s per s (the connections defaults for this limit unless overridden). Figures from the vendors' records.\n\n",
		c.Workers, c.Rate, c.Burst, c.Rate/2, c.HiddenBurst, c.Hidden, c.Rate, c.Raised, c.MinRate, c.Quiet, c.Increase)
	b.WriteString("| | fleet | 429s in the first 10 s (last at) | 429s per minute after 10 s | accepted ÷ hidden limit after 10 s | raised limit found after | 429s after the raise | accepted ÷ raised limit, last 20 s | DynamoDB calls per accepted push (of which reads) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range res {
		last, found, calls := "none", "never", "— (local pacing)"
		if r.Last429First >= 0 {
			last = fmt.Sprintf("%.1f s", r.Last429First)
		}
		if r.FoundAfter >= 0 {
			found = fmt.Sprintf("%.1f s", r.FoundAfter)
		}
		if r.CallsPerPush >= 0 {
			calls = fmt.Sprintf("%.2f (%.2f)", r.CallsPerPush, r.ReadsPerPush)
		}
		fmt.Fprintf(&b, "| %c | %s | %d (%s) | %.1f | %.0f%% | %s | %d | %.0f%% | %s |\n", 'a'+rune(i), r.Name,
			r.Throttled429First, last, r.PerMinuteSettled, 100*r.AcceptedOfHidden, found, r.Throttled429Up, 100*r.AcceptedOfRaised, calls)
	}
	b.WriteString("\nAccepted pushes per 5 s (hidden limit: ")
	fmt.Fprintf(&b, "%.0f per 5 s until %v, then %.0f):\n\n```\n", c.Rate/2*5, c.Hidden, c.Rate*5)
	for i, r := range res {
		parts := make([]string, len(r.Timeline))
		for j, n := range r.Timeline {
			parts[j] = strconv.Itoa(n)
		}
		fmt.Fprintf(&b, "%c %s\n", 'a'+rune(i), strings.Join(parts, " "))
	}
	b.WriteString("```\n\n429s per 5 s:\n\n```\n")
	for i, r := range res {
		parts := make([]string, len(r.Throttled))
		for j, n := range r.Throttled {
			parts[j] = strconv.Itoa(n)
		}
		fmt.Fprintf(&b, "%c %s\n", 'a'+rune(i), strings.Join(parts, " "))
	}
	b.WriteString("```\n")
	return b.String()
}
