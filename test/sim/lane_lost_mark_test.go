package sim

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// loseMark is the lanes' view of the store: the next Mark write (an ADD
// to the lanes' item) lands and its answer is lost, once, while lose is set.
type loseMark struct {
	*DB
	lose atomic.Bool
}

func (l *loseMark) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := l.DB.UpdateItem(ctx, in, opts...)
	if err == nil && strings.HasPrefix(aws.ToString(in.UpdateExpression), "ADD ") && l.lose.CompareAndSwap(true, false) {
		return nil, errors.New("injected: the mark landed and its answer was lost")
	}
	return out, err
}

// A change whose mark landed with its answer lost fails, and Retry sends
// a copy that carries the failed delivery's nonce (owners.go). A newer
// change that covers every date of the first comes in between: its mark
// finds the lane owned by the lost mark's token, whose lease is young,
// and leaves the push to that owner, which is gone. The copy then finds
// its change wholly superseded (ari.Applied.Current 0); it must still
// mark, so that it takes the lane its failed delivery holds and pushes
// both. Skipping it left the lane to its lease and a next change that a
// quiet hotel never sends (adversary seed 71: 248 days stale after an
// hour, no message left, the sweep finding nothing: no lease was ended).
func TestRetriedChangeTakesItsLaneEvenWhenNewerChangesHoldItsDates(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim}, connconfig.Booking(lim, "", auroraBK1001), nil)
	lost := &loseMark{DB: m.store}
	m.sy.Lanes = &lane.Store{DB: lost, Table: "state", Now: m.clock.Now}
	src := newPMSOracle("hotel-aurora")

	first := src.change("rates", "DBL", "2027-02-01", "2027-02-01", 100)
	lost.lose.Store(true)
	out := m.sy.HandleBatch(t.Context(), []syncer.Message{{ID: "m1", Body: first}})
	if len(out) != 1 || out[0].Err == nil || len(out[0].Owners) == 0 {
		t.Fatalf("the change whose mark's answer was lost: %+v, want it failed with the owners its copy carries", out)
	}
	owners := out[0].Owners

	// A newer change of the same dates and more, before the copy.
	m.changes([]string{src.change("rates", "DBL", "2027-02-01", "2027-02-03", 200)}, 10)
	m.drain(100)

	// The copy, as Retry sends it.
	m.handle([]syncer.Message{{ID: "m1-copy", Body: first, Redelivered: true, Attempt: 1, Owners: owners}})
	m.drain(100)

	src.assertNewest(t, m.ota, "BK-1001")
}
