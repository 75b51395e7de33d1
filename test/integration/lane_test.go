package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

func newLaneStore(t *testing.T, now func() time.Time) *lane.Store {
	t.Helper()
	db := emulator.DynamoDB(t)
	return &lane.Store{DB: db, Table: emulator.NewStateTable(t, db), Now: now}
}

func el(room string, seq int64) lane.Element {
	return lane.Element{RoomType: room, RatePlan: "BAR", From: "2027-01-01", To: "2027-01-03", Sequence: seq}
}

// A lane's life: the first change claims it, later ones only add; a claim
// fences off a second copy of the job; a clear drops exactly what was
// pushed, and releases the lane once nothing is left.
func TestLaneMarkClaimClear(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newLaneStore(t, nil)
	bk := lane.ID{Property: "hotel-1", Kind: "rates", Channel: "booking_com", Credential: "c1", HotelRef: "BK-1"}
	ex := lane.ID{Property: "hotel-1", Kind: "rates", Channel: "expedia", Credential: "c1", HotelRef: "EX-1"}
	tok := func(prefix string) func(lane.ID) string {
		return func(id lane.ID) string { return prefix + id.Channel }
	}

	marks, err := s.Mark(ctx, []lane.ID{bk, ex}, []lane.Element{el("DBL", 1)}, tok("a-"))
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) != 2 || !marks[0].Claimed || !marks[1].Claimed {
		t.Fatalf("first mark = %+v, want both lanes claimed", marks)
	}
	marks, err = s.Mark(ctx, []lane.ID{bk, ex}, []lane.Element{el("TWN", 2)}, tok("b-"))
	if err != nil {
		t.Fatal(err)
	}
	if marks[0].Claimed || marks[1].Claimed || len(marks[0].Pending.Elements) != 2 {
		t.Fatalf("second mark = %+v, want no claim and 2 elements pending", marks)
	}

	p, err := s.Claim(ctx, bk, "a-booking_com", "n1", nil)
	if err != nil || len(p.Elements) != 2 || p.Owner != "n1" {
		t.Fatalf("claim = %+v, %v; want 2 elements owned by n1", p, err)
	}
	var other *lane.NotOwnerError
	if _, err := s.Claim(ctx, bk, "a-booking_com", "n2", nil); !errors.As(err, &other) || other.Pending.Owner != "n1" {
		t.Fatalf("second claim with the same token = %v, want NotOwnerError naming n1", err)
	}

	// A change arrives during the push: finishing fails, and the next
	// claim clears what the push carried and keeps the new change.
	if _, err := s.Mark(ctx, []lane.ID{bk}, []lane.Element{el("STE", 3)}, tok("c-")); err != nil {
		t.Fatal(err)
	}
	if released, seen, err := s.Finish(ctx, bk, "n1", p.Elements); released || err != nil || len(seen.Elements) != len(p.Elements)+1 || seen.Owner != "n1" {
		t.Fatalf("finish with a new change pending = %v, %+v, %v; want not released, owned by n1, the push's elements and STE#3 pending", released, seen, err)
	}
	rest, err := s.Claim(ctx, bk, "n1", "n2", p.Elements)
	if err != nil || len(rest.Elements) != 1 || rest.Elements[0] != el("STE", 3) || rest.Owner != "n2" {
		t.Fatalf("claim = %+v, %v; want STE#3 left, owned by n2", rest, err)
	}
	if released, _, err := s.Finish(ctx, bk, "n2", rest.Elements); !released || err != nil {
		t.Fatalf("last finish = %v, %v; want the lane released", released, err)
	}
	// The released lane is claimed by the next change again.
	marks, err = s.Mark(ctx, []lane.ID{bk}, []lane.Element{el("DBL", 4)}, tok("d-"))
	if err != nil || !marks[0].Claimed {
		t.Fatalf("mark after release = %+v, %v; want a claim", marks, err)
	}
	// The other lane of the item was never touched by all this.
	p, err = s.Claim(ctx, ex, "a-expedia", "m1", nil)
	if err != nil || len(p.Elements) != 2 {
		t.Fatalf("expedia claim = %+v, %v; want its 2 elements", p, err)
	}
}

// An owner that dies holding a lane loses it when its lease runs out.
func TestLaneLeaseTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newClock()
	s := newLaneStore(t, clock.Now)
	s.Lease = time.Minute
	id := lane.ID{Property: "hotel-1", Kind: "availability", Channel: "bk", Credential: "c1", HotelRef: "BK-1"}
	if _, err := s.Mark(ctx, []lane.ID{id}, []lane.Element{el("DBL", 1)}, func(lane.ID) string { return "dead" }); err != nil {
		t.Fatal(err)
	}
	marks, err := s.Mark(ctx, []lane.ID{id}, []lane.Element{el("DBL", 2)}, func(lane.ID) string { return "alive" })
	if err != nil || marks[0].Claimed {
		t.Fatalf("mark within the lease = %+v, %v; want no claim", marks, err)
	}
	clock.Advance(61 * time.Second)
	marks, err = s.Mark(ctx, []lane.ID{id}, []lane.Element{el("DBL", 3)}, func(lane.ID) string { return "alive" })
	if err != nil || !marks[0].Claimed || len(marks[0].Pending.Elements) != 3 {
		t.Fatalf("mark after the lease = %+v, %v; want a takeover with 3 elements", marks, err)
	}
	// A job of the dead owner cannot push any more.
	var other *lane.NotOwnerError
	if _, err := s.Claim(ctx, id, "dead", "x", nil); !errors.As(err, &other) {
		t.Fatalf("claim by the dead owner = %v, want NotOwnerError", err)
	}
}
