package syncer

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

func TestForClass(t *testing.T) {
	live := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-02", To: "2027-01-02", Sequence: 7}
	bulk := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-01", To: "2027-12-31", Sequence: lane.BulkSequence}
	// Bulk elements cut by month: DBL's January, then February; SGL's
	// January; and the rest of DBL's January from the 20th (a part).
	dblJan := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-01", To: "2027-01-31"}
	dblFeb := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: "2027-02-01", To: "2027-02-28"}
	sglJan := lane.Element{RoomType: "SGL", RatePlan: "BAR", From: "2027-01-01", To: "2027-01-31"}
	dblJanRest := dblJan
	dblJanRest.From = "2027-01-20"
	tests := []struct {
		name    string
		pending []lane.Element
		whole   map[lane.Element]lane.Element
		bulk    bool
		want    string
		handOff bool
	}{
		{"a live push carries the live elements alone", []lane.Element{bulk, live}, nil, false, "[DBL#BAR#2027-01-02#2027-01-02#7]", false},
		{"a live push with only bulk pending hands off", []lane.Element{bulk}, nil, false, "[]", true},
		{"a bulk push carries live first, then bulk", []lane.Element{bulk, live}, nil, true, "[DBL#BAR#2027-01-02#2027-01-02#7 DBL#BAR#2027-01-01#2027-12-31#0]", false},
		{"bulk in date order, every cell's month together", []lane.Element{dblJan, dblFeb, sglJan}, nil, true,
			"[DBL#BAR#2027-01-01#2027-01-31#0 SGL#BAR#2027-01-01#2027-01-31#0 DBL#BAR#2027-02-01#2027-02-28#0]", false},
		{"a part resumed keeps its element's place", []lane.Element{dblJanRest, dblFeb, sglJan}, map[lane.Element]lane.Element{dblJanRest: dblJan}, true,
			"[DBL#BAR#2027-01-20#2027-01-31#0 SGL#BAR#2027-01-01#2027-01-31#0 DBL#BAR#2027-02-01#2027-02-28#0]", false},
		{"nothing pending: no hand-off", nil, nil, false, "[]", false},
	}
	for _, tt := range tests {
		got, handOff := forClass(tt.pending, tt.whole, tt.bulk)
		if fmt.Sprint(got) != tt.want || handOff != tt.handOff {
			t.Errorf("%s: forClass = %v, %v; want %s, %v", tt.name, got, handOff, tt.want, tt.handOff)
		}
	}
}

// A bulk route books one token from a burst of 1, only free at once; on
// an endpoint metered by items only the horizon changes.
func TestBulkRoute(t *testing.T) {
	r := dispatch.Route{Bucket: limiter.Bucket{Key: "k", Limit: limiter.PerSecond(10, 8)}, Reserve: 2}
	b := bulkRoute(r)
	if b.Bucket.Limit.Burst != 1 || b.Horizon != time.Millisecond || b.Reserve != 9 || b.Bucket.Limit.Rate != 10 || !b.OneAsker {
		t.Errorf("bulk route %+v: want burst 1, horizon 1ms, reserve 9 (the drain empties the whole burst), rate unchanged, one asker", b)
	}
	// With leased shares the burst keeps the leases' tokens, so that the
	// bucket stays valid and its shared part's burst is 1 (adversary seed
	// 23: every bulk push of a shared bucket was refused as invalid and
	// dead-lettered).
	shared := r
	shared.Bucket.Limit = limiter.PerSecond(10, 20)
	shared.Bucket.Share = &limiter.Share{Fraction: 0.5, Leases: 3, Burst: 2, Epoch: time.Minute}
	if err := shared.Bucket.Share.Validate(shared.Bucket.Limit); err != nil {
		t.Fatalf("the test's share: %v", err)
	}
	b = bulkRoute(shared)
	if err := b.Bucket.Validate(); err != nil {
		t.Errorf("bulk route of a shared bucket: %v", err)
	}
	if b.Bucket.Limit.Burst != 7 || b.Reserve != 2+13 || b.Bucket.Share.SharedLimit(b.Bucket.Limit, 0).Burst != 1 {
		t.Errorf("bulk route of a shared bucket %+v: want burst 7 (the leases' 6 and one), reserve 15, a shared burst of 1", b)
	}
	r.ItemWeight = 1
	if b := bulkRoute(r); b.Bucket.Limit.Burst != 8 || b.Horizon != time.Millisecond {
		t.Errorf("bulk route on items %+v: want the burst kept and a 1 ms horizon", b)
	}
	if !isBulkToken(newBulkToken()) || isBulkToken(newToken()) || len(newBulkToken()) != len(newToken()) {
		t.Error("bulk tokens must be told from others by their prefix alone, and be as long")
	}
}

// A pushing token is never taken by a live change, its parked token and a
// fresh bulk token are; all are bulk tokens, as long as any other, and a
// job under a pushing token claims from its parked one too.
func TestBulkTokens(t *testing.T) {
	pushing := newPushingToken()
	parked := parkedOf(pushing)
	tests := []struct {
		name                  string
		token                 string
		bulk, pushes, takable bool
	}{
		{"a bulk job waiting for its slot", newBulkToken(), true, false, true},
		{"a bulk push on its way out", pushing, true, true, false},
		{"a bulk lane parked between pushes", parked, true, false, true},
		{"a live job", newToken(), false, false, false},
	}
	for _, tt := range tests {
		if isBulkToken(tt.token) != tt.bulk || isPushingToken(tt.token) != tt.pushes || takeable(tt.token) != tt.takable || len(tt.token) != len(newToken()) {
			t.Errorf("%s (%s): bulk %v, pushing %v, takeable %v, %d characters; want %v, %v, %v, %d",
				tt.name, tt.token, isBulkToken(tt.token), isPushingToken(tt.token), takeable(tt.token), len(tt.token), tt.bulk, tt.pushes, tt.takable, len(newToken()))
		}
	}
	ref := laneRef{Token: pushing, Unanswered: []string{"t-lost"}}
	if !ref.ours(parked) || !ref.ours("t-lost") || ref.ours(newBulkToken()) {
		t.Errorf("a job under %s: ours(parked %s) %v, ours(unanswered) %v; want both, and no other bulk token", pushing, parked, ref.ours(parked), ref.ours("t-lost"))
	}
}
