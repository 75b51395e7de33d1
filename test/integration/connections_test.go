package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// connRig is a wire rig (an OpenTravel mock OTA that maps only the room
// type "DBL" and the rate plan the changes name) whose syncer reads its
// connections from the store through a cache on a clock of the test's.
type connRig struct {
	*wireRig
	store *connections.Store
	cache *connections.Cache
	clock *limitertest.Clock
	t0    time.Time
}

func newConnRig(t *testing.T) *connRig {
	t.Helper()
	r := newWireRig(t, mockota.WireOpenTravel)
	db := emulator.DynamoDB(t)
	clock := newClock()
	store := &connections.Store{DB: db, Table: emulator.NewConnectionsTable(t, db), Config: r.sy.Config, Now: clock.Now}
	cache := &connections.Cache{Source: store, Config: r.sy.Config, Now: clock.Now}
	r.sy.Connections = cache
	return &connRig{wireRig: r, store: store, cache: cache, clock: clock, t0: clock.Now()}
}

func (r *connRig) at(d time.Duration) { r.clock.Set(r.t0.Add(d)) }

// change is an availability change of property's room type and rate plan
// on one date.
func (r *connRig) change(seq int64, property, room, plan, date string, n int) string {
	detail, _ := json.Marshal(ari.Change{EventID: fmt.Sprintf("ev-%d", seq), PropertyID: property, Sequence: seq, Kind: "availability",
		RoomType: room, RatePlan: plan, From: date, To: date, Values: map[string]any{"available": n}})
	return fmt.Sprintf(`{"version":"0","id":"ev-%d","detail-type":"ARI change","source":"pms","time":"2026-11-30T12:00:00Z","detail":%s}`, seq, detail)
}

// handle hands the messages to the syncer in one batch.
func (r *connRig) handle(t *testing.T, msgs ...syncer.Message) []syncer.MessageResult {
	t.Helper()
	out := r.sy.HandleBatch(context.Background(), msgs)
	for _, m := range out {
		if m.Err != nil {
			t.Fatalf("message %s: %v", m.ID, m.Err)
		}
	}
	return out
}

func (r *connRig) put(t *testing.T, c connections.Connection) connections.Connection {
	t.Helper()
	out, err := r.store.Put(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A hotel connected through the store, with no deploy and no change to the
// connections file, receives its pushes once the workers' cache has aged
// out: within connections.DefaultMaxAge of the write, in simulated time.
func TestConnectionAddedWithoutDeployIsPushed(t *testing.T) {
	r := newConnRig(t)
	const hotel = "hotel-borealis"
	first := r.handle(t, syncer.Message{ID: "1", Body: r.change(1, hotel, "DBL", "BAR", "2026-12-01", 4)})
	if !strings.Contains(first[0].Change.Invalid, "unknown property") {
		t.Fatalf("a change to a hotel with no connection: %+v, want it dead-lettered as unknown", first[0].Change)
	}
	r.put(t, connections.Connection{PropertyID: hotel, Property: config.Property{Channel: "ota", Credential: "cred-1", HotelRef: "H-2002"}})

	r.at(connections.DefaultMaxAge)
	out := r.handle(t, syncer.Message{ID: "2", Body: r.change(2, hotel, "DBL", "BAR", "2026-12-02", 5)})
	if out[0].Change.Invalid != "" {
		t.Fatalf("a change %v after the hotel was connected was dead-lettered: %s", connections.DefaultMaxAge, out[0].Change.Invalid)
	}
	acc := r.p.ota.Accepted()
	if len(acc) != 1 {
		t.Fatalf("the OTA applied %d requests after the hotel was connected, want 1 (results %+v)", len(acc), out[0].Jobs)
	}
	if body := string(acc[0].Body); !strings.Contains(body, `HotelCode="H-2002"`) || !strings.Contains(body, `Start="2026-12-02"`) {
		t.Fatalf("the push is not the new hotel's change: %s", body)
	}
	if n := r.cache.Reads(); n != 2 {
		t.Fatalf("the cache read the store %d times, want 2 (once per property per %v)", n, connections.DefaultMaxAge)
	}
}

// A change to a room type the connection does not map never reaches the
// vendor: it is dead-lettered when its lanes are marked, with a reason
// that names the code, the channel and the property, and counted as
// unmapped. The change beside it, mapped, goes out with the OTA's ids
// (the mock OTA knows only "DBL", so the PMS's "DBL-PMS" would be refused).
func TestUnmappedRoomIsDeadLetteredBeforeAnyRequest(t *testing.T) {
	r := newConnRig(t)
	r.put(t, connections.Connection{PropertyID: "hotel-aurora", Property: config.Property{Channel: "ota", Credential: "cred-1", HotelRef: "H-1001",
		RoomTypes: map[string]string{"DBL-PMS": "DBL"}, RatePlans: map[string]string{"BAR-PMS": "BAR"}}})
	out := r.handle(t,
		syncer.Message{ID: "1", Body: r.change(1, "hotel-aurora", "DBL-PMS", "BAR-PMS", "2026-12-01", 4)},
		syncer.Message{ID: "2", Body: r.change(2, "hotel-aurora", "SUI", "BAR-PMS", "2026-12-01", 2)})
	var res dispatch.Result
	for _, m := range out {
		if m.Change.Invalid != "" {
			t.Fatalf("change %s dead-lettered as invalid: %s", m.ID, m.Change.Invalid)
		}
		for _, j := range m.Jobs {
			res.Pushes, res.Refused = res.Pushes+j.Pushes, res.Refused+j.Refused
		}
	}
	reqs := r.p.ota.Requests()
	if len(reqs) != 1 || res.Refused != 0 {
		t.Fatalf("the vendor got %d requests and refused %d changes, want 1 request (the mapped change) and no refusal", len(reqs), res.Refused)
	}
	if body := string(reqs[0].Body); !strings.Contains(body, `InvTypeCode="DBL"`) || !strings.Contains(body, `RatePlanCode="BAR"`) || strings.Contains(body, "PMS") || strings.Contains(body, "SUI") {
		t.Fatalf("the push does not carry the mapped change in the OTA's ids alone: %s", body)
	}
	if n := len(r.p.ota.Accepted()); n != 1 {
		t.Fatalf("the OTA applied %d requests, want 1", n)
	}
	letters := r.p.receiveDLQ()
	if len(letters) != 1 {
		t.Fatalf("dead letters %v, want the unmapped change alone", letters)
	}
	for body, reason := range letters {
		for _, want := range []string{`room type "SUI"`, `channel "ota"`, `property "hotel-aurora"`} {
			if !strings.Contains(reason, want) {
				t.Fatalf("dead letter reason %q does not name %s", reason, want)
			}
		}
		if _, err := job.Decode(body); err != nil || !strings.Contains(body, "SUI#BAR-PMS#2026-12-01#2026-12-01") {
			t.Fatalf("dead letter %s is not the SUI change's refused-change job (%v)", body, err)
		}
	}
	counts, err := r.store.Unmapped(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0].Code != "SUI" || counts[0].Field != "room_type" || counts[0].Count != 1 || counts[0].Channel != "ota" || counts[0].PropertyID != "hotel-aurora" {
		t.Fatalf("unmapped counts %+v, want SUI on ota of hotel-aurora once", counts)
	}
	// Alone, an unmapped change marks no lane: it books no slot either.
	alone := r.handle(t, syncer.Message{ID: "3", Body: r.change(3, "hotel-aurora", "TWN", "BAR-PMS", "2026-12-02", 1)})
	if alone[0].Change.Lanes != 0 || len(alone[0].Jobs) != 0 || len(r.p.ota.Requests()) != 1 {
		t.Fatalf("an unmapped change alone marked %d lanes, made jobs %+v; the vendor has %d requests; want no lane, no job, still 1 request",
			alone[0].Change.Lanes, alone[0].Jobs, len(r.p.ota.Requests()))
	}
}

// Disabling a connection drops what its lanes hold: the lingering push of
// a change marked before the disable sends nothing and dead-letters
// nothing, and the drop is counted.
func TestDisabledConnectionDropsItsPendingWithoutPushing(t *testing.T) {
	r := newConnRig(t)
	r.sy.Linger = 2 * time.Second // the change's push waits on the deferred queue
	r.put(t, connections.Connection{PropertyID: "hotel-aurora", Property: config.Property{Channel: "ota", Credential: "cred-1", HotelRef: "H-1001"}})
	out := r.handle(t,
		syncer.Message{ID: "1", Body: r.change(1, "hotel-aurora", "DBL", "BAR", "2026-12-01", 4)},
		syncer.Message{ID: "2", Body: r.change(2, "hotel-aurora", "DBL", "BAR", "2026-12-05", 3)})
	if out[0].Change.Lanes != 1 || len(out[0].Jobs) != 1 || out[0].Jobs[0].Outcome != dispatch.Deferred {
		t.Fatalf("the changes marked %d lanes with jobs %+v, want one lane whose push lingers on the deferred queue", out[0].Change.Lanes, out[0].Jobs)
	}
	if _, err := r.store.SetDisabled(context.Background(), "hotel-aurora", "ota", true); err != nil {
		t.Fatal(err)
	}
	r.at(connections.DefaultMaxAge)

	jobs := r.p.receiveDeferred(t, 1)
	if len(jobs) != 1 {
		t.Fatalf("%d deferred jobs, want the lane's lingering push", len(jobs))
	}
	body, err := job.Encode(jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	res := r.handle(t, syncer.Message{ID: "3", Body: body, Deferred: true})
	if n := len(r.p.ota.Requests()); n != 0 {
		t.Fatalf("the vendor got %d requests from a disabled connection's lane, want 0 (results %+v)", n, res[0].Jobs)
	}
	if n := r.p.dlqCount(); n != 0 {
		t.Fatalf("%d dead letters, want none: a disabled connection's changes are dropped, not dead-lettered", n)
	}
	if n := r.sy.Dropped(); n != 2 {
		t.Fatalf("%d pending changes counted dropped, want 2", n)
	}
	later := r.handle(t, syncer.Message{ID: "4", Body: r.change(3, "hotel-aurora", "DBL", "BAR", "2026-12-07", 1)})
	if later[0].Change.Lanes != 0 || len(later[0].Jobs) != 0 || later[0].Change.Invalid != "" {
		t.Fatalf("a change after the disable: %+v, want it stored and no lane marked", later[0].Change)
	}
}
