// Command pipelinedemo runs the whole sync pipeline on the local stack: a
// stream of PMS change events on the changes queue, a fleet of sync
// workers (the function's own code, sdk/pipeline/syncer, fed by pollers that play
// the SQS event source mappings), the deferred and dead-letter queues, and
// mock OTAs that enforce their published limits. It prints progress, then
// a report per channel endpoint.
//
//	eval "$(scripts/localstack.sh start)"; go run ./test/pipelinedemo
//
// scripts/demo.sh does both.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"
)

type options struct {
	workers  int
	events   int
	duration time.Duration
	rate     float64
	burst    int
	// stopsells > 0 runs the priority scenario: rate changes and that
	// many stop-sells per second on one shared meter.
	stopsells float64
	// trace, if set, is a file for a line per worker event (tracer).
	trace string
	// fillQuota sets syncer.Syncer.FillQuota on every worker.
	fillQuota bool
	// format is "wire" (each mock OTA speaks its vendor's format:
	// booking_com opentravel, expedia expedia-ar) or "json" (both take
	// fleetbucket's JSON body).
	format string
	// poison is how many changes name a room type no OTA has mapped.
	poison int
	// resync, if set, resyncs resyncHotel's year while the live stream
	// runs (resync.go).
	resync bool
	// margin is every endpoint's "margin" (config.Endpoint.Margin); empty:
	// the config's default.
	margin string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("pipelinedemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.workers, "workers", 8, "sync workers (Lambda instances) per queue, each with its own limiter (≥ 1)")
	fs.IntVar(&o.events, "events", 400, "PMS change events to send (≥ 1)")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "how long the events take to arrive (≥ 1s)")
	fs.Float64Var(&o.rate, "rate", 4, "each OTA endpoint's published rate per credential, requests per second (> 0)")
	fs.IntVar(&o.burst, "burst", 8, "each OTA endpoint's published burst (≥ 1)")
	fs.Float64Var(&o.stopsells, "stopsells", 0, "priority scenario: send only rate changes (-events over -duration) plus this many stop-sells per second, on one OTA whose availability (urgent) and rates share a meter that keeps half its burst for urgent pushes (0: the default scenario)")
	fs.BoolVar(&o.fillQuota, "fillquota", false, "every lane's linger yields to a bucket that would fill up meanwhile (syncer.Syncer.FillQuota; normal lanes on a meter with an urgent reserve always do)")
	fs.StringVar(&o.format, "format", "wire", `message format: "wire" (booking_com takes opentravel, expedia expedia-ar, each read by an independent decoder) or "json" (both take fleetbucket's JSON body)`)
	fs.IntVar(&o.poison, "poison", 0, "this many changes name a room type no OTA has mapped: each is refused, isolated from the changes merged with it, and dead-lettered alone (≥ 0, ≤ -events)")
	// The emulator's calls take far longer than DynamoDB's (p50 about
	// 60 ms, p99 about 200 ms under the demo's load, against single-digit
	// ms), and a push reaches the OTA a delivery, a claim and a render
	// after its slot: a job later than its margin books a new slot, and
	// at 250 ms a fifth of the demo's slots went unused so; 500 ms keeps
	// that to about 1% (docs/benchmarks.md).
	fs.StringVar(&o.margin, "margin", "500ms", `every endpoint's "margin": refill time its bucket keeps free for the delay between a grant and its request reaching the OTA (a Go duration, "0s" for none; empty: the config's default, 100ms)`)
	fs.BoolVar(&o.resync, "resync", false, "resync "+resyncHotel+"'s stored year (every room type and rate plan its connections map, every kind) a quarter into the live stream, at the bulk class: reports when it was in sync against the quota-bound floor, and the live latency during it against the rest")
	fs.StringVar(&o.trace, "trace", "", "write a line per worker event (reservations, pushes, deferrals, deliveries) to this file, for finding where a run's time goes")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var problems []error
	if o.workers < 1 {
		problems = append(problems, fmt.Errorf("-workers is %d, want ≥ 1", o.workers))
	}
	if o.events < 1 {
		problems = append(problems, fmt.Errorf("-events is %d, want ≥ 1", o.events))
	}
	if o.duration < time.Second {
		problems = append(problems, fmt.Errorf("-duration is %v, want ≥ 1s", o.duration))
	}
	if !(o.rate > 0) || o.rate > 1000 {
		problems = append(problems, fmt.Errorf("-rate is %v, want > 0 and ≤ 1000", o.rate))
	}
	if o.stopsells < 0 || o.stopsells > 100 {
		problems = append(problems, fmt.Errorf("-stopsells is %v, want 0 to 100", o.stopsells))
	}
	if o.stopsells > 0 && o.burst < 2 {
		problems = append(problems, fmt.Errorf("-burst is %d, want ≥ 2 with -stopsells (half is kept for urgent pushes)", o.burst))
	}
	if o.format != "wire" && o.format != "json" {
		problems = append(problems, fmt.Errorf("-format is %q, want wire or json", o.format))
	}
	if o.poison > 0 && (o.format != "wire" || o.stopsells > 0) {
		problems = append(problems, fmt.Errorf("-poison needs -format wire and no -stopsells: only the vendors' formats refuse an unmapped room type"))
	}
	if o.resync && (o.format != "wire" || o.stopsells > 0 || o.poison > 0) {
		problems = append(problems, fmt.Errorf("-resync needs -format wire and no -stopsells or -poison: the resynced hotel's availability is its room types', which the vendors' formats hold so"))
	}
	if o.poison < 0 || o.poison > o.events {
		problems = append(problems, fmt.Errorf("-poison is %d, want 0 to -events (%d)", o.poison, o.events))
	}
	if o.burst < 1 {
		problems = append(problems, fmt.Errorf("-burst is %d, want ≥ 1", o.burst))
	}
	if err := errors.Join(problems...); err != nil {
		fmt.Fprintf(stderr, "pipelinedemo: %v\n", err)
		fs.Usage()
		return o, err
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "pipelinedemo: %v\n", err)
		os.Exit(1)
	}
}
