package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/emf"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
)

// A shadow push's would-defer and wait, and a local-share push, reach the
// EMF metrics; a flush with none still writes them (as zeros).
func TestModeMetrics(t *testing.T) {
	h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: &emf.Counters{}}
	h.observe(dispatch.Result{Outcome: dispatch.Pushed, Pushes: 1, ShadowWouldDefer: true, ShadowWait: 1500 * time.Millisecond}, "e1")
	h.observe(dispatch.Result{Outcome: dispatch.Pushed, Pushes: 1, ShadowWait: 200 * time.Millisecond}, "e2")
	h.observe(dispatch.Result{Outcome: dispatch.Pushed, Pushes: 1, LocalShares: 1, StoreError: true}, "e3")
	got := flushed(t, h)
	for name, want := range map[string]float64{"ShadowWouldDefer": 1, "ShadowWait": 1700, "LocalSharePushes": 1, "ShadowWouldShed": 0, "Pushes": 3} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
	for _, name := range metricNames {
		h.metrics.Add(name, 0)
	}
	for _, name := range millisMetricNames {
		h.metrics.AddMillis(name, 0)
	}
	idle := flushed(t, h)
	for _, name := range []string{"ShadowWouldDefer", "ShadowWait", "LocalSharePushes"} {
		if v, ok := idle[name]; !ok || v != 0 {
			t.Errorf("an idle flush: %s = %v (present %v), want 0", name, v, ok)
		}
	}
}

func flushed(t *testing.T, h *handler) map[string]float64 {
	t.Helper()
	var buf bytes.Buffer
	if err := h.metrics.Flush(&buf, "ns", time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	out := map[string]float64{}
	for k, v := range doc {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out
}

// The local share divides by both event sources' caps: the config's
// MaxConcurrency, or the stack's override.
func TestMaxInstances(t *testing.T) {
	cfg, err := config.Load("../../config/connections.example.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := maxInstances(cfg, 0), 2*cfg.MaxConcurrency(); got != want {
		t.Fatalf("maxInstances = %d, want 2 × MaxConcurrency = %d", got, want)
	}
	if got := maxInstances(cfg, 30); got != 60 {
		t.Fatalf("maxInstances with override 30 = %d, want 60", got)
	}
	if _, err := readSettings(func(k string) string {
		return map[string]string{"FLEETBUCKET_TABLE": "t", "FLEETBUCKET_STATE_TABLE": "s", "FLEETBUCKET_DEFERRED_QUEUE_URL": "d",
			"FLEETBUCKET_DLQ_URL": "q", "FLEETBUCKET_MAX_RECEIVE_COUNT": "5", "FLEETBUCKET_MAX_CONCURRENCY": "zero"}[k]
	}); err == nil {
		t.Fatal("FLEETBUCKET_MAX_CONCURRENCY=zero accepted")
	}
}

// Every outcome has its counter: an expired job is counted as Expired, not
// lost under an empty metric name.
func TestEveryOutcomeIsCounted(t *testing.T) {
	for _, o := range []dispatch.Outcome{dispatch.Deferred, dispatch.Shed, dispatch.DeadLettered, dispatch.Expired, dispatch.Coalesced} {
		h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: &emf.Counters{}}
		h.observe(dispatch.Result{Outcome: o}, "e1")
		name := outcomeMetric[o]
		if got := flushed(t, h); name == "" || got[name] != 1 {
			t.Errorf("outcome %s: metric %q = %v, want 1", o, name, got[name])
		}
	}
}
