package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/emf"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
)

// An invocation that is neither an SQS batch nor the schedule's sweep is
// refused with what it was, rather than handled as an empty batch.
func TestInvokeRefusesWhatItCannotRoute(t *testing.T) {
	h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: &emf.Counters{}}
	for _, raw := range []string{`{"action":"sweep-all"}`, `{"source":"aws.events"}`, `[1]`} {
		if _, err := h.Invoke(context.Background(), json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), "neither an SQS batch") {
			t.Errorf("Invoke(%s) = %v, want it refused", raw, err)
		}
	}
}

// A credential refusal is counted for its alarm.
func TestCredentialRefusalIsCounted(t *testing.T) {
	h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: &emf.Counters{}}
	h.observe(dispatch.Result{Outcome: dispatch.Deferred, CredentialRefused: true}, "")
	h.observe(dispatch.Result{Outcome: dispatch.Pushed, Pushes: 1}, "")
	if got := flushed(t, h); got["CredentialRefusals"] != 1 {
		t.Errorf("CredentialRefusals = %v, want 1", got["CredentialRefusals"])
	}
}

// A hotel refusal is counted for its alarm, apart from the credential's.
func TestHotelRefusalIsCounted(t *testing.T) {
	h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: &emf.Counters{}}
	h.observe(dispatch.Result{Outcome: dispatch.Deferred, HotelRefused: true}, "")
	h.observe(dispatch.Result{Outcome: dispatch.Pushed, Pushes: 1}, "")
	if got := flushed(t, h); got["HotelRefusals"] != 1 || got["CredentialRefusals"] != 0 {
		t.Errorf("HotelRefusals = %v, CredentialRefusals = %v; want 1 and 0", got["HotelRefusals"], got["CredentialRefusals"])
	}
}

// A parity event names the connection it checks; one that does not is
// refused with the shape it needs, before any read.
func TestInvokeRoutesAParityEvent(t *testing.T) {
	h := &handler{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: &emf.Counters{}}
	for _, raw := range []string{`{"action":"parity"}`, `{"action":"parity","property":"p"}`} {
		if _, err := h.Invoke(context.Background(), json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), `want {"action": "parity", "property": …, "channel": …}`) {
			t.Errorf("Invoke(%s) = %v, want it refused naming the event's shape", raw, err)
		}
	}
}
