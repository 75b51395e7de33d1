package sim

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A lane job that cannot push (the limiter's table is down, so every try
// is deferred for the store cooldown) expires at its endpoint's
// max_deferrals: it goes to the dead-letter queue with an "expired" reason
// and nothing loops on. Its lane is not stranded: the lease is over and
// the pending change stays in the lane item, so the next change, once the
// store is back, takes the lane over and pushes both.
func TestExpiredLaneJobIsDeadLetteredAndItsLaneReleased(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim}, connconfig.Booking(lim, `, "max_deferrals": 5`, auroraBK1001),
		func(d *dispatch.Dispatcher) { d.Policy.StoreCooldown = 2 * time.Second })
	src := newPMSOracle("hotel-aurora")

	m.limiterDown.Store(true)
	m.changes([]string{src.change("rates", "DBL", "2027-02-01", "2027-02-03", 1)}, 10)
	m.drain(100)

	if n := len(m.ota.Requests()); n != 0 {
		t.Fatalf("the OTA got %d requests with the limiter's table down, want none (closed)", n)
	}
	dlq := m.sent.deadLetters(deadURL)
	if len(dlq) != 1 {
		t.Fatalf("dead-letter queue holds %d messages, want the one expired lane job: %v", len(dlq), dlq)
	}
	var expiredBody string
	for body, reason := range dlq {
		expiredBody = body
		j, err := job.Decode(body)
		if err != nil {
			t.Fatalf("dead-lettered body is not a push job: %v\n%s", err, body)
		}
		if want := "expired: 5 deferrals, max_deferrals 5"; !strings.HasPrefix(reason, want) || j.Deferrals != 5 || j.Endpoint != "rates" {
			t.Fatalf("dead-lettered job %s (deferrals %d) with reason %q, want %q after 5 deferrals", j.ID, j.Deferrals, reason, want)
		}
	}
	expired := 0
	for _, res := range m.results {
		if res.Outcome == dispatch.Expired {
			expired++
		}
	}
	if expired != 1 {
		t.Fatalf("%d results expired, want 1", expired)
	}

	// The lane item, read raw: the lease is over and the change is still
	// pending.
	item := memLaneItem(t, m.store, "hotel-aurora#rates")
	suffix := "booking_com#cred-1#BK-1001"
	n, _ := item["l:"+suffix].(*types.AttributeValueMemberN)
	if n == nil {
		t.Fatalf("lane item %v has no lease", item)
	}
	lease, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil || time.UnixMicro(lease).After(m.clock.Now()) {
		t.Fatalf("lane lease %v (%v), want it over by %v", time.UnixMicro(lease), err, m.clock.Now())
	}
	if pending, ok := item["d:"+suffix].(*types.AttributeValueMemberSS); !ok || len(pending.Value) != 1 {
		t.Fatalf("lane pending %v, want the expired job's one change", item["d:"+suffix])
	}

	// A second copy of the same job (the queue delivers at least once)
	// expires too, but finds the lease already ended: it is dropped, not
	// dead-lettered again.
	out := m.sy.HandleBatch(t.Context(), []syncer.Message{{ID: "copy", Body: expiredBody, Deferred: true}})[0]
	if out.Err != nil || len(out.Jobs) != 1 || out.Jobs[0].Outcome != dispatch.Coalesced || !strings.HasPrefix(out.Jobs[0].Reason, "not expired") {
		t.Fatalf("second copy of the expired job: %+v, want coalesced as not expired", out)
	}
	if dlq := m.sent.deadLetters(deadURL); len(dlq) != 0 {
		t.Fatalf("the second copy was dead-lettered too: %v", dlq)
	}

	// The store is back; the next change wakes the lane, and its push
	// carries the expired job's change too.
	m.limiterDown.Store(false)
	m.changes([]string{src.change("rates", "DBL", "2027-02-10", "2027-02-10", 2)}, 10)
	m.drain(100)
	src.assertNewest(t, m.ota, "BK-1001")
	if dlq := m.sent.deadLetters(deadURL); len(dlq) != 0 {
		t.Errorf("dead-lettered %d more messages: %v", len(dlq), dlq)
	}
	t.Logf("expired after 5 deferrals; the next change pushed both in %d OTA request(s)", len(m.ota.Accepted()))
}
