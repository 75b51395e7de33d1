// Command fairness runs the cross-process fairness benchmark on the local
// stack: N worker processes (this same binary, started as "fairness
// worker …") × P pushers each push through otapush.Client on one shared
// bucket against one mock OTA, and it prints a Markdown report.
//
//	eval "$(scripts/localstack.sh start)"
//	go run ./test/fairness/cmd/fairness -procs 8 -pushers 5 -duration 10s
//
// It exits 1 when the vendor accepted more than burst + rate·W in some
// window, when a process made no push, or when max ÷ min pushes per process
// exceeds -max-ratio (if set); 2 for bad flags.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"

	"github.com/fleetbucket/fleetbucket/test/fairness"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(fairness.WorkerMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := fairness.DefaultConfig
	var jsonOut, env string
	var maxRatio float64
	fs := flag.NewFlagSet("fairness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.Procs, "procs", c.Procs, "worker processes")
	fs.IntVar(&c.Pushers, "pushers", c.Pushers, "pushers in each process")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "how long they push")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "the bucket's and the vendor's rate per second")
	fs.IntVar(&c.Burst, "burst", c.Burst, "the bucket's and the vendor's burst")
	fs.DurationVar(&c.Margin, "margin", c.Margin, "the bucket's margin (limiter.Limit.Margin); the vendor enforces burst + rate·W without it")
	fs.DurationVar(&c.StartDelay, "start-delay", c.StartDelay, "time for the processes to start before they all push")
	fs.StringVar(&jsonOut, "json", "", "also write the result as JSON to this file")
	fs.StringVar(&env, "env", "", "a line describing the machine, for the report")
	fs.Float64Var(&maxRatio, "max-ratio", 0, "fail when max ÷ min pushes per process exceeds this (0: report only)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fairness: unexpected arguments %q\n", fs.Args())
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "fairness: %v\n", err)
		return 1
	}
	c.Worker = []string{self, "worker"}
	r, err := fairness.Run(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "fairness: %v\n", err)
		return 1
	}
	fmt.Fprint(stdout, r.Markdown(env))
	if jsonOut != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err == nil {
			err = os.WriteFile(jsonOut, append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "fairness: %v\n", err)
			return 1
		}
	}
	code := 0
	if r.Broken {
		fmt.Fprintf(stderr, "fairness: the vendor accepted more than burst + rate·W: %+v\n", r.Fullest)
		code = 1
	}
	if slices.Contains(r.PushesPerProcess, 0) {
		fmt.Fprintf(stderr, "fairness: a process made no push: %v\n", r.PushesPerProcess)
		code = 1
	}
	if maxRatio > 0 && (math.IsInf(r.MaxOverMin, 1) || r.MaxOverMin > maxRatio) {
		fmt.Fprintf(stderr, "fairness: max ÷ min pushes per process %.2f, over -max-ratio %.2f\n", r.MaxOverMin, maxRatio)
		code = 1
	}
	return code
}
