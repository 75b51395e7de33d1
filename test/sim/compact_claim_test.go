package sim

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// A compaction while a push is in flight may merge the elements marked
// meanwhile into an element equal, string for string, to one the push
// carried: the block's merged element keeps the newest sequence, and a
// late change of an older sequence leaves it as it was. The owner's next
// claim then deleted that element as pushed, and the late change's dates
// with it, which the push had rendered before their state was written
// (adversary seed 866: expedia p4 availability TWN 2027-06-18..07-18,
// sequence 694, carried by a push claimed at 54.8 s; a change of sequence
// 310 for 06-30 marked at 55.5 s and compacted into that same element at
// 55.6 s; the next claim at 58.5 s cleared it, and 06-30 never reached the
// OTA, its lane clean, nothing queued, nothing listed).
func TestAClaimAfterACompactionClearsNoMergedElement(t *testing.T) {
	ctx := context.Background()
	db := NewDB(rand.New(rand.NewPCG(1, 2)), Latency{})
	db.checkItems = true
	if err := ari.CreateTable(ctx, db, "state"); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	s := &lane.Store{DB: db, Table: "state", Lease: 2 * time.Minute, Now: func() time.Time { return now }}
	id := lane.ID{Property: "p00004", Kind: "availability", Channel: "expedia", Credential: "c0", HotelRef: "EX-4"}
	merged := lane.Element{RoomType: "TWN", From: "2027-06-18", To: "2027-07-18", Sequence: 694}
	late := lane.Element{RoomType: "TWN", From: "2027-06-30", To: "2027-06-30", Sequence: 310}
	tokens := func(tok string) func(lane.ID) string { return func(lane.ID) string { return tok } }

	if _, err := s.Mark(ctx, []lane.ID{id}, []lane.Element{merged}, tokens("m-1")); err != nil {
		t.Fatal(err)
	}
	// The push claims the lane and carries the merged element.
	now = now.Add(time.Second)
	carried, err := s.Claim(ctx, id, "m-1", "t-1", nil)
	if err != nil || len(carried.Elements) != 1 {
		t.Fatalf("claim: %+v, %v", carried, err)
	}
	// The late change marks its date; a mark compacts the lane into the
	// element the push carried.
	now = now.Add(time.Second)
	marks, err := s.Mark(ctx, []lane.ID{id}, []lane.Element{late}, tokens("m-2"))
	if err != nil || len(marks) != 1 {
		t.Fatalf("mark: %+v, %v", marks, err)
	}
	if ok, err := s.Compact(ctx, id, marks[0].Pending, []lane.Element{merged}); err != nil || !ok {
		t.Fatalf("compact: %v, %v", ok, err)
	}
	// The push's Finish is refused (compacted); its next job claims,
	// clearing what the push carried.
	now = now.Add(time.Second)
	p, err := s.Claim(ctx, id, "t-1", "t-2", carried.Elements)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Elements {
		if e.RoomType == late.RoomType && e.From <= late.From && late.To <= e.To {
			return
		}
	}
	t.Errorf("after the claim the lane holds %v: %s, which the push never rendered after its change, is pending no more", p.Elements, late.From)
}
