// Command benchreport turns the output of the benchmark suite into the
// Markdown report docs/bench/report.md: a summary table, then the details of
// each comparison. scripts/bench.sh runs the benchmarks and then this:
//
//	benchreport -bench bench.txt -bench benchcompare.txt \
//	    -seed-json seed.json -seed-md seed.md -chart fleet-vs-local.svg -env "…" \
//	    -fairness-json fairness.json -fairness-md fairness.md
//
// It reads go test -bench output (the standard benchmark format: name,
// iterations, then value-unit pairs) and seedfigure's JSON and Markdown.
// A number that is missing (a benchmark that failed or was not run) shows
// as "n/a" rather than stopping the report.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func run(args []string, stdout, stderr io.Writer) int {
	var benches listFlag
	var seedJSON, seedMD, chart, env, fairJSON, fairMD string
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&benches, "bench", "a file of go test -bench output (repeatable)")
	fs.StringVar(&seedJSON, "seed-json", "", "seedfigure's -json output")
	fs.StringVar(&seedMD, "seed-md", "", "seedfigure's Markdown table")
	fs.StringVar(&chart, "chart", "", "the chart's path relative to the report, to link it")
	fs.StringVar(&env, "env", "", "a line describing the machine and versions")
	fs.StringVar(&fairJSON, "fairness-json", "", "test/fairness's -json output")
	fs.StringVar(&fairMD, "fairness-md", "", "test/fairness's Markdown section")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || len(benches) == 0 {
		fmt.Fprintln(stderr, "usage: benchreport -bench FILE [-bench FILE…] [-seed-json FILE -seed-md FILE] [-fairness-json FILE -fairness-md FILE] [-chart PATH] [-env TEXT]")
		return 2
	}
	results := results{}
	for _, path := range benches {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "benchreport: %v\n", err)
			return 1
		}
		err = results.parse(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "benchreport: %s: %v\n", path, err)
			return 1
		}
	}
	var seed *seedResults
	if seedJSON != "" {
		s, err := loadSeed(seedJSON)
		if err != nil {
			fmt.Fprintf(stderr, "benchreport: %v\n", err)
			return 1
		}
		seed = s
	}
	var seedTable string
	if seedMD != "" {
		b, err := os.ReadFile(seedMD)
		if err != nil {
			fmt.Fprintf(stderr, "benchreport: %v\n", err)
			return 1
		}
		seedTable = string(b)
	}
	var fair *fairnessResults
	var fairSection string
	if fairJSON != "" {
		b, err := os.ReadFile(fairJSON)
		if err == nil {
			fair = &fairnessResults{}
			err = json.Unmarshal(b, fair)
		}
		if err != nil {
			fmt.Fprintf(stderr, "benchreport: %s: %v\n", fairJSON, err)
			return 1
		}
	}
	if fairMD != "" {
		b, err := os.ReadFile(fairMD)
		if err != nil {
			fmt.Fprintf(stderr, "benchreport: %v\n", err)
			return 1
		}
		fairSection = string(b)
	}
	fmt.Fprint(stdout, report(results, seed, seedTable, chart, env, fair, fairSection))
	return 0
}

// results maps a benchmark name (without the -GOMAXPROCS suffix) to its
// metrics by unit.
type results map[string]map[string]float64

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.+)$`)

// parse reads benchmark lines and ignores everything else (logs, PASS, ok).
func (r results) parse(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		fields := strings.Fields(m[2])
		if len(fields)%2 != 0 {
			return fmt.Errorf("odd value/unit pairs in %q", sc.Text())
		}
		metrics := map[string]float64{}
		for i := 0; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return fmt.Errorf("bad value %q in %q", fields[i], sc.Text())
			}
			metrics[fields[i+1]] = v
		}
		r[m[1]] = metrics
	}
	return sc.Err()
}

// get returns a metric, and whether it was measured.
func (r results) get(bench, unit string) (float64, bool) {
	v, ok := r[bench][unit]
	return v, ok
}

// f formats a metric with the given verb, or "n/a".
func (r results) f(bench, unit, verb string) string {
	v, ok := r.get(bench, unit)
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf(verb, v)
}

// ratio formats a/b, or "n/a".
func (r results) ratio(benchA, unitA, benchB, unitB, verb string) string {
	a, okA := r.get(benchA, unitA)
	b, okB := r.get(benchB, unitB)
	if !okA || !okB || b == 0 {
		return "n/a"
	}
	return fmt.Sprintf(verb, a/b)
}

type seedResults struct {
	Quota   float64 `json:"quota_per_second"`
	Initial int     `json:"initial_workers"`
	Runs    []struct {
		Mode            string  `json:"mode"`
		Workers         int     `json:"workers"`
		Sent            int     `json:"sent"`
		Throttled       int     `json:"throttled_429"`
		SteadyThrottled int     `json:"steady_throttled_429"`
		SteadyRate      float64 `json:"steady_rate"`
	} `json:"runs"`
}

func loadSeed(path string) (*seedResults, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s seedResults
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// largest returns the runs of each mode at the largest worker count.
func (s *seedResults) largest() (workers int, local, shared string) {
	local, shared = "n/a", "n/a"
	if s == nil || s.Quota <= 0 {
		return 0, local, shared
	}
	for _, r := range s.Runs {
		workers = max(workers, r.Workers)
	}
	for _, r := range s.Runs {
		if r.Workers != workers {
			continue
		}
		cell := fmt.Sprintf("%.2f× quota, %d 429s", r.SteadyRate/s.Quota, r.Throttled)
		if r.Mode == "local" {
			local = cell
		} else {
			shared = cell
		}
	}
	return workers, local, shared
}
