package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A property with 120 connections of one kind (DynamoDB's 4 KB limit on
// an expression held about 48 lanes' marks in one write): a change marks
// every lane, each lane's push carries it, every lane is finished and
// released, and nothing is dead-lettered, with every request under the
// limit. The in-memory store refuses an expression over 4 KB as DynamoDB
// does (limits.go), which neither moto nor minidyn does; its answers come
// at once, so no grant comes back later than its slot's margin, as on a
// loaded emulator.
func TestPropertyWithManyConnectionsIsMarked(t *testing.T) {
	const n = 120
	lim := limiter.PerSecond(500, 500)
	var conns []string
	for i := range n {
		conns = append(conns, fmt.Sprintf(`{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-%d"}`, i))
	}
	m := newMemLanes(t, mockota.Config{Limit: lim}, connconfig.Booking(lim, "", `"hotel-aurora": [`+strings.Join(conns, ",\n")+`]`), nil)
	src := newPMSOracle("hotel-aurora")
	src.change("rates", "DBL", "2027-03-01", "2027-03-03", 1)
	src.change("rates", "TWN", "2027-03-02", "2027-03-02", 2)
	var msgs []syncer.Message
	for i, body := range src.bodies {
		msgs = append(msgs, syncer.Message{ID: fmt.Sprint(i), Body: body})
	}
	pushed := 0
	for _, out := range m.sy.HandleBatch(t.Context(), msgs) {
		if out.Err != nil || out.Change.Invalid != "" || out.Change.Lanes != n {
			t.Fatalf("change %s: %+v, %v; want its %d lanes marked", out.ID, out.Change, out.Err, n)
		}
		for _, res := range out.Jobs {
			if res.Outcome != dispatch.Pushed {
				t.Errorf("change %s: lane job %s %s (%s), want it pushed", out.ID, res.JobID, res.Outcome, res.Reason)
			}
			pushed++
		}
	}
	if pushed != n {
		t.Errorf("%d lane jobs pushed, want %d (one per lane, both changes in it)", pushed, n)
	}
	if st := m.store.Stats(); st.Unexpected != 0 {
		t.Errorf("%d requests refused (over DynamoDB's 4 KB expression limit, or otherwise): %v", st.Unexpected, st.FirstErrors)
	}
	if dl := m.sent.deadLetters(deadURL); len(dl) != 0 {
		t.Errorf("%d dead letters, want none: %v", len(dl), dl)
	}

	// Every lane was marked (its version counts the mark) and finished:
	// nothing pending, no owner.
	item := memLaneItem(t, m.store, "hotel-aurora#rates")
	for i := range n {
		suffix := fmt.Sprintf("booking_com#cred-1#BK-%d", i)
		if _, ok := item["v:"+suffix]; !ok {
			t.Errorf("lane %s was never marked", suffix)
		}
		for _, a := range []string{"d:", "o:", "l:"} {
			if v, ok := item[a+suffix]; ok {
				t.Errorf("lane %s still holds %s%v, want it finished and released", suffix, a, v)
			}
		}
	}
	for i := range n {
		src.assertNewest(t, m.ota, fmt.Sprintf("BK-%d", i))
	}
}
