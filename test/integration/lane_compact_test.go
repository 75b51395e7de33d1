package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// oldMark is the previous release's Mark of one lane, written as that code
// wrote it: the element added, the owner and lease set if there were none,
// and no version bumped (it knew of no v: nor x:).
func oldMark(t *testing.T, db *dynamodb.Client, table string, id lane.ID, e lane.Element, token string, lease time.Time) {
	t.Helper()
	suffix := id.Channel + "#" + id.Credential + "#" + id.HotelRef
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &table,
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id.Property + "#" + id.Kind},
			"sk": &types.AttributeValueMemberS{Value: "lanes"}},
		UpdateExpression:         aws.String("ADD #d0 :e SET #o0 = if_not_exists(#o0, :t0), #l0 = if_not_exists(#l0, :l)"),
		ExpressionAttributeNames: map[string]string{"#d0": "d:" + suffix, "#o0": "o:" + suffix, "#l0": "l:" + suffix},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":e":  &types.AttributeValueMemberSS{Value: []string{fmt.Sprintf("%s#%s#%s#%s#%d", e.RoomType, e.RatePlan, e.From, e.To, e.Sequence)}},
			":t0": &types.AttributeValueMemberS{Value: token},
			":l":  &types.AttributeValueMemberN{Value: strconv.FormatInt(lease.UnixMicro(), 10)},
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pendingDays reads the lane's pending elements straight from the item,
// with a parser of the test's own: the newest sequence pending for each
// room#date.
func pendingDays(t *testing.T, db *dynamodb.Client, table string, id lane.ID) (map[string]int64, int) {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id.Property + "#" + id.Kind},
			"sk": &types.AttributeValueMemberS{Value: "lanes"}}})
	if err != nil {
		t.Fatal(err)
	}
	set, _ := out.Item["d:"+id.Channel+"#"+id.Credential+"#"+id.HotelRef].(*types.AttributeValueMemberSS)
	if set == nil {
		return nil, 0
	}
	days := map[string]int64{}
	for _, s := range set.Value {
		f := strings.Split(s, "#")
		seq, _ := strconv.ParseInt(f[4], 10, 64)
		from, _ := time.Parse("2006-01-02", f[2])
		to, _ := time.Parse("2006-01-02", f[3])
		for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
			k := f[0] + "#" + d.Format("2006-01-02")
			days[k] = max(days[k], seq)
		}
	}
	return days, len(set.Value)
}

// A worker of the previous release marks a lane (no version bumped)
// between a new worker's Mark and its Compact, as in a rolling deploy.
// The compaction must not replace the elements with a merge of what the
// new worker read: every date either worker marked stays pending with
// its newest sequence, and the next compaction applies. Without the old
// mark, the compaction applies at once and keeps every date's newest
// sequence too (a merge that kept an older element fails here).
func TestCompactionKeepsAnElementAnOldWorkerMarked(t *testing.T) {
	t.Parallel()
	for _, oldWorker := range []bool{false, true} {
		t.Run(fmt.Sprintf("old mark between: %v", oldWorker), func(t *testing.T) {
			ctx := context.Background()
			db := emulator.DynamoDB(t)
			store := &lane.Store{DB: db, Table: emulator.NewStateTable(t, db)}
			id := lane.ID{Property: "hotel-1", Kind: "rates", Channel: "booking_com", Credential: "c1", HotelRef: "BK-1"}
			token := func(lane.ID) string { return "new-worker" }
			newest := map[string]int64{} // room#date → the newest sequence marked: the oracle
			note := func(e lane.Element) {
				from, _ := time.Parse("2006-01-02", e.From)
				to, _ := time.Parse("2006-01-02", e.To)
				for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
					k := e.RoomType + "#" + d.Format("2006-01-02")
					newest[k] = max(newest[k], e.Sequence)
				}
			}
			rng := rand.New(rand.NewPCG(6, 27))
			var els []lane.Element
			for seq := int64(1); seq <= 300; seq++ {
				from := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, rng.IntN(40))
				e := lane.Element{RoomType: []string{"DBL", "TWN"}[rng.IntN(2)], RatePlan: "BAR", From: from.Format("2006-01-02"),
					To: from.AddDate(0, 0, rng.IntN(4)).Format("2006-01-02"), Sequence: seq}
				els = append(els, e)
				note(e)
			}
			marks, err := store.Mark(ctx, []lane.ID{id}, els, token)
			if err != nil || len(marks) != 1 || !marks[0].Claimed {
				t.Fatalf("mark: %+v, %v; want the lane claimed", marks, err)
			}
			seen := marks[0].Pending
			if oldWorker {
				old := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-10", To: "2027-01-12", Sequence: 1000}
				oldMark(t, db, store.Table, id, old, "old-worker", time.Now().Add(time.Minute))
				note(old)
			}
			compacted, err := store.Compact(ctx, id, seen, lane.Coalesce(seen.Elements, 7))
			if err != nil {
				t.Fatal(err)
			}
			if compacted == oldWorker {
				t.Errorf("Compact applied: %v, want %v", compacted, !oldWorker)
			}
			check := func(when string) int {
				days, n := pendingDays(t, db, store.Table, id)
				for k, seq := range newest {
					if days[k] < seq {
						t.Errorf("%s: %s pending at sequence %d, want %d", when, k, days[k], seq)
					}
				}
				return n
			}
			n := check("after the compaction")
			if !oldWorker && n >= len(els) {
				t.Errorf("after the compaction %d elements pending, want fewer than the %d marked", n, len(els))
			}
			if oldWorker {
				// The next mark compacts what it reads, the old element in it.
				e := lane.Element{RoomType: "TWN", RatePlan: "BAR", From: "2027-02-20", To: "2027-02-20", Sequence: 1001}
				note(e)
				marks, err := store.Mark(ctx, []lane.ID{id}, []lane.Element{e}, token)
				if err != nil {
					t.Fatal(err)
				}
				seen := marks[0].Pending
				if ok, err := store.Compact(ctx, id, seen, lane.Coalesce(seen.Elements, 7)); !ok || err != nil {
					t.Fatalf("the next compaction: %v, %v; want it applied", ok, err)
				}
				if n := check("after the next compaction"); n >= len(seen.Elements) {
					t.Errorf("after the next compaction %d elements pending, want fewer than %d", n, len(seen.Elements))
				}
			}
		})
	}
}

// A push carries a lane's merged element; a late change of an older
// sequence marks a date inside it and a compaction merges the two into
// that same element, which now stands for a date the push never rendered
// after its change. The owner's next claim, clearing what the push
// carried, must leave it pending (adversary seed 866; test/sim's
// TestAClaimAfterACompactionClearsNoMergedElement runs the same steps on
// the simulation's store): the claim's condition on the compaction flag
// and its answer (ALL_OLD) are DynamoDB's to evaluate.
func TestAClaimAfterACompactionClearsNoMergedElement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := emulator.DynamoDB(t)
	store := &lane.Store{DB: db, Table: emulator.NewStateTable(t, db)}
	id := lane.ID{Property: "hotel-1", Kind: "availability", Channel: "expedia", Credential: "c1", HotelRef: "EX-1"}
	merged := lane.Element{RoomType: "TWN", From: "2027-06-18", To: "2027-07-18", Sequence: 694}
	late := lane.Element{RoomType: "TWN", From: "2027-06-30", To: "2027-06-30", Sequence: 310}
	tokens := func(tok string) func(lane.ID) string { return func(lane.ID) string { return tok } }
	if _, err := store.Mark(ctx, []lane.ID{id}, []lane.Element{merged}, tokens("m-1")); err != nil {
		t.Fatal(err)
	}
	carried, err := store.Claim(ctx, id, "m-1", "t-1", nil)
	if err != nil || len(carried.Elements) != 1 {
		t.Fatalf("claim: %+v, %v", carried, err)
	}
	marks, err := store.Mark(ctx, []lane.ID{id}, []lane.Element{late}, tokens("m-2"))
	if err != nil || len(marks) != 1 {
		t.Fatalf("mark: %+v, %v", marks, err)
	}
	if ok, err := store.Compact(ctx, id, marks[0].Pending, []lane.Element{merged}); err != nil || !ok {
		t.Fatalf("compact: %v, %v", ok, err)
	}
	p, err := store.Claim(ctx, id, "t-1", "t-2", carried.Elements)
	if err != nil || p.Owner != "t-2" {
		t.Fatalf("claim after the compaction: %+v, %v; want the lane t-2's", p, err)
	}
	if days, _ := pendingDays(t, db, store.Table, id); days["TWN#2027-06-30"] < late.Sequence {
		t.Errorf("after the claim TWN 2027-06-30 is pending at sequence %d, want %d: the push never rendered it after its change", days["TWN#2027-06-30"], late.Sequence)
	}
	// A claim by another token is still refused, compacted or not.
	if _, err := store.Claim(ctx, id, "t-1", "t-3", carried.Elements); err == nil {
		t.Error("a claim under the lane's previous token succeeded")
	}
}
