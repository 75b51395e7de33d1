// Command mockota runs the mock OTA API on 127.0.0.1 for the local demo and
// benchmarks, which need the vendor in its own process so that a fleet of
// real Lambda binaries can share it.
//
//	mockota -rate 20 -burst 40 -addr-file /tmp/ota.url -credentials hotelA,hotelB
//
// It serves until SIGINT or SIGTERM and then logs one line with what it
// accepted and refused, the number a demo or benchmark reports, and one
// with the vendor-side invariant as its own sliding-window check found it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// run returns the exit code: 0 after a signal, 2 for bad flags (the flag
// package's convention), 1 if the server cannot start.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	logger := newLogger(stderr)
	s, err := start(opts)
	if err != nil {
		logger.Print(err)
		return 1
	}
	logger.Printf("listening on %s", s.URL())
	serve(ctx, s, opts, logger)
	return 0
}

func newLogger(w io.Writer) *log.Logger { return log.New(w, "mockota: ", log.LstdFlags) }

type options struct {
	cfg      mockota.Config
	addrFile string
}

// parseFlags reports bad flags on stderr, with the usage, and returns an
// error; flag.ErrHelp for -h.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("mockota", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: mockota [flags]\n\n"+
			"Runs a mock OTA API on 127.0.0.1 that enforces a token bucket per\n"+
			"(credential, endpoint) and answers 429 with Retry-After beyond it.\n\n")
		fs.PrintDefaults()
	}
	var (
		o            options
		creds, rooms string
		wire         string
	)
	fs.Float64Var(&o.cfg.Limit.Rate, "rate", 10, "published limit: tokens per second, > 0")
	fs.IntVar(&o.cfg.Limit.Burst, "burst", 20, "published limit: bucket size, ≥ 1")
	hidden := gcra.Limit{}
	fs.Float64Var(&hidden.Rate, "hidden-rate", 0, "unpublished stricter limit: tokens per second (0 = none; set with -hidden-burst)")
	fs.IntVar(&hidden.Burst, "hidden-burst", 0, "unpublished stricter limit: bucket size (0 = none; set with -hidden-rate)")
	fs.StringVar(&o.addrFile, "addr-file", "", "write the server's URL to this file once listening (removed on exit)")
	fs.StringVar(&creds, "credentials", "", "comma-separated accepted bearer credentials (empty = any)")
	fs.StringVar(&wire, "format", "json", "message format taken: json (fleetbucket's body), opentravel (Booking.com B.XML) or expedia-ar")
	fs.StringVar(&rooms, "mapped-rooms", "", "with -format opentravel or expedia-ar: comma-separated room types the vendor has mapped (empty = all); others are refused in a 200")
	fs.IntVar(&o.cfg.Port, "port", 0, "port on 127.0.0.1 (0 = any free port)")
	fs.DurationVar(&o.cfg.Latency, "latency", 0, "delay before every answer, e.g. 20ms")
	fs.BoolVar(&o.cfg.RetryAfterHTTPDate, "retry-after-date", false, "send Retry-After as an HTTP-date instead of seconds")
	fs.Func("enforce", "how the limit is enforced: gcra (default), window (the mock's own sliding-window log, no sdk/gcra) or none", func(v string) error {
		e, err := mockota.ParseEnforcement(v)
		o.cfg.Enforce = e
		return err
	})
	if err := fs.Parse(args); err != nil {
		return o, err
	}

	usage := func(format string, a ...any) (options, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintf(stderr, "mockota: %v\n\n", err)
		fs.Usage()
		return o, err
	}
	if fs.NArg() > 0 {
		return usage("unexpected arguments %q", fs.Args())
	}
	if err := gcra.Check(o.cfg.Limit, 1, 0); err != nil {
		return usage("-rate %v -burst %d: %v", o.cfg.Limit.Rate, o.cfg.Limit.Burst, err)
	}
	if hidden != (gcra.Limit{}) && o.cfg.Enforce != mockota.EnforceGCRA {
		return usage("-hidden-rate/-hidden-burst need -enforce gcra")
	}
	if hidden != (gcra.Limit{}) {
		if err := gcra.Check(hidden, 1, 0); err != nil {
			return usage("-hidden-rate %v -hidden-burst %d: %v (set both, or neither)", hidden.Rate, hidden.Burst, err)
		}
		o.cfg.HiddenLimit = &hidden
	}
	if creds != "" {
		for c := range strings.SplitSeq(creds, ",") {
			if c = strings.TrimSpace(c); c == "" {
				return usage("-credentials %q has an empty entry", creds)
			}
			o.cfg.Credentials = append(o.cfg.Credentials, c)
		}
	}
	switch wire {
	case "json":
		if rooms != "" {
			return usage("-mapped-rooms needs -format opentravel or expedia-ar")
		}
	case mockota.WireOpenTravel, mockota.WireExpediaAR:
		o.cfg.Wire = &mockota.Wire{Format: wire}
		for r := range strings.SplitSeq(rooms, ",") {
			if r = strings.TrimSpace(r); r != "" {
				o.cfg.Wire.MappedRooms = append(o.cfg.Wire.MappedRooms, r)
			}
		}
	default:
		return usage("-format %q, want json, opentravel or expedia-ar", wire)
	}
	if o.cfg.Port < 0 || o.cfg.Port > 65535 {
		return usage("-port %d, want 0..65535", o.cfg.Port)
	}
	if o.cfg.Latency < 0 {
		return usage("-latency %v, want ≥ 0", o.cfg.Latency)
	}
	return o, nil
}

// start starts the server and publishes its URL. The file is written to a
// temporary name and renamed, so a script polling for it never reads half a
// URL.
func start(o options) (*mockota.Server, error) {
	s, err := mockota.Start(o.cfg)
	if err != nil {
		return nil, err
	}
	if o.addrFile == "" {
		return s, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(o.addrFile), ".mockota-url-*")
	if err == nil {
		_, err = tmp.WriteString(s.URL() + "\n")
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), o.addrFile)
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("write -addr-file: %w", err)
	}
	return s, nil
}

// serve blocks until ctx ends, then logs the summary, stops the server and
// removes the address file, so that a later run never finds a dead URL.
func serve(ctx context.Context, s *mockota.Server, o options, logger *log.Logger) {
	began := time.Now()
	<-ctx.Done()
	s.Close()
	// One snapshot, so that the counts add up.
	accepted, limited, all := 0, 0, s.Requests()
	for _, r := range all {
		switch {
		case r.Status/100 == 2:
			accepted++
		case r.Status == 429:
			limited++
		}
	}
	logger.Printf("stopping after %v: %d accepted, %d answered 429, %d requests in all",
		time.Since(began).Round(time.Millisecond), accepted, limited, len(all))
	// The vendor-side invariant, checked by the mock's own sliding-window
	// code whatever -enforce was.
	if err := s.CheckWindows(); err != nil {
		logger.Printf("accepted more than burst + rate·W: %v", err)
	} else {
		logger.Printf("no window of accepted requests over burst + rate·W")
	}
	if o.addrFile != "" {
		_ = os.Remove(o.addrFile)
	}
}
