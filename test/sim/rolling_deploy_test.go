package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// In a rolling deploy, or a rollback, a worker receives lane jobs that a
// worker of another release deferred. One that carries a field this
// release does not know (an optional hint added since) is pushed as any
// other, its lane's change reaching the vendor; one it cannot read goes to
// the dead-letter queue with the reason, and nothing of it is pushed.
func TestAWorkerPushesAJobANewerReleaseDeferredAndDeadLettersAMalformedOne(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, connconfig.Booking(lim, "", auroraBK1001), nil)
	src := newPMSOracle("hotel-aurora")

	// A booked bucket defers the lane's job: its message is one a worker
	// of either release may receive.
	booked := m.bookRates(lim, 6*time.Second)
	m.changes([]string{src.change("rates", "DBL", "2027-04-01", "2027-04-02", 7)}, 10)
	if len(m.pending) != 1 {
		t.Fatalf("change into a booked bucket: %+v, %d deferred; want its lane job deferred", m.results, len(m.pending))
	}
	body, err := job.Encode(m.pending[0])
	if err != nil {
		t.Fatal(err)
	}
	m.pending = nil
	m.clock.Set(booked)

	malformed := strings.Replace(body, `"deferrals":`, `"deferrals":"one","was":`, 1)
	outs := m.sy.HandleBatch(context.Background(), []syncer.Message{{ID: "malformed", Body: malformed, Deferred: true}})
	if len(outs) != 1 || outs[0].Err != nil || len(outs[0].Jobs) != 0 {
		t.Fatalf("a malformed job: %+v, want it dead-lettered and nothing pushed", outs)
	}
	dlq := m.sent.deadLetters(deadURL)
	if reason, ok := dlq[malformed]; !ok || !strings.Contains(reason, "malformed job message") || !strings.Contains(reason, "deferrals of type int") {
		t.Fatalf("dead letters %v, want the malformed body with the reason it could not be read", dlq)
	}

	newer := strings.Replace(body, `"deferrals":`, `"lease_first_v2":true,"hint":{"why":"busy"},"deferrals":`, 1)
	if newer == body {
		t.Fatalf("no deferrals in %s", body)
	}
	m.handle([]syncer.Message{{ID: "newer", Body: newer, Deferred: true}})
	if len(m.results) != 2 || m.results[1].Outcome != dispatch.Pushed {
		t.Fatalf("a job with fields of a newer release: %+v, want it pushed", m.results)
	}
	if dlq := m.sent.deadLetters(deadURL); len(dlq) != 0 {
		t.Fatalf("dead letters %v, want none", dlq)
	}
	src.assertNewest(t, m.ota, "BK-1001")
}
