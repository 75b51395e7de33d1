package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func TestFlagsAreValidatedWithUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-workers", "4,x"}, {"-workers", "0"}, {"-rate", "0"}, {"-burst", "0"}, {"-duration", "1s"}, {"extra"},
	} {
		var stderr bytes.Buffer
		if _, err := parseFlags(args, &stderr); err == nil {
			t.Errorf("%q accepted", args)
		} else if !strings.Contains(stderr.String(), "usage: seedfigure") {
			t.Errorf("%q: no usage message in %q", args, stderr.String())
		}
	}
	o, err := parseFlags([]string{"-workers", "4, 40"}, io.Discard)
	if err != nil || len(o.workers) != 2 || o.initial != 4 {
		t.Errorf("defaults: %+v, %v", o, err)
	}
}

func TestSVGIsWellFormedAndLabelsTheOverload(t *testing.T) {
	r := &Results{Quota: 20, Burst: 20, Initial: 4, Duration: 5, Runs: []Run{
		{Mode: modeLocal, Workers: 4, SteadyRate: 20}, {Mode: modeShared, Workers: 4, SteadyRate: 20},
		{Mode: modeLocal, Workers: 40, SteadyRate: 200, Throttled: 1000}, {Mode: modeShared, Workers: 40, SteadyRate: 20, Throttled: 2},
	}}
	var buf bytes.Buffer
	if err := r.SVG(&buf); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
	for _, want := range []string{"200 = 10× quota", "quota 20 req/s", "40 workers", "1000"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if md := r.Markdown(); !strings.Contains(md, "| 40 | local: `x/time/rate`, 5/s each | 200.0 | 10.00 |") {
		t.Errorf("table:\n%s", md)
	}
}

func TestNiceScale(t *testing.T) {
	for _, c := range []struct{ max, top, step float64 }{{224, 250, 50}, {1169, 1200, 200}, {0, 1, 0.2}, {3.3, 4, 1}} {
		if top, step := niceScale(c.max); top != c.top || step != c.step {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", c.max, top, step, c.top, c.step)
		}
	}
}
