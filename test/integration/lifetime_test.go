package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
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
	r := newLaneRig(t, lim, mockota.Config{Limit: lim}, oneHotelConfig(lim, `, "max_deferrals": 5`))
	r.linger = -1
	r.downTable = r.table // only the limiter's table: lanes and state stay reachable
	src := newPMS("hotel-aurora")

	r.down.Store(true)
	r.enqueueBodies([]string{src.change("rates", "DBL", "2027-02-01", "2027-02-03", 1)})
	r.run(1, 2*time.Minute, 5*time.Second)

	if n := len(r.ota.Requests()); n != 0 {
		t.Fatalf("the OTA got %d requests with the limiter's table down, want none (closed)", n)
	}
	dlq := r.receiveDLQ()
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
	expired, fenced := 0, 0
	for _, res := range r.results {
		switch {
		case res.Outcome == dispatch.Expired:
			expired++
		case res.Outcome == dispatch.Coalesced && strings.HasPrefix(res.Reason, "not expired"):
			fenced++ // a second copy of the job (at-least-once delivery)
		}
	}
	if expired != 1 {
		t.Fatalf("%d results expired, want 1", expired)
	}

	// The lane item, read raw: the lease is over and the change is still
	// pending.
	item := laneItem(t, r, "hotel-aurora#rates")
	suffix := "booking_com#cred-1#BK-1001"
	lease, err := strconv.ParseInt(attrN(item["l:"+suffix]), 10, 64)
	if err != nil || time.UnixMicro(lease).After(time.Now()) {
		t.Fatalf("lane lease %v (%v), want it over", time.UnixMicro(lease), err)
	}
	if pending, ok := item["d:"+suffix].(*ddbtypes.AttributeValueMemberSS); !ok || len(pending.Value) != 1 {
		t.Fatalf("lane pending %v, want the expired job's one change", item["d:"+suffix])
	}

	// A second copy of the same job (the queue delivers at least once)
	// expires too, but finds the lease already ended: it is dropped, not
	// dead-lettered again.
	out := r.worker().HandleBatch(context.Background(), []syncer.Message{{ID: "copy", Body: expiredBody, Deferred: true}})[0]
	if out.Err != nil || len(out.Jobs) != 1 || out.Jobs[0].Outcome != dispatch.Coalesced || !strings.HasPrefix(out.Jobs[0].Reason, "not expired") {
		t.Fatalf("second copy of the expired job: %+v, want coalesced as not expired", out)
	}
	if dlq := r.receiveDLQ(); len(dlq) != 0 {
		t.Fatalf("the second copy was dead-lettered too: %v", dlq)
	}

	// The store is back; the next change wakes the lane, and its push
	// carries the expired job's change too.
	r.down.Store(false)
	r.enqueueBodies([]string{src.change("rates", "DBL", "2027-02-10", "2027-02-10", 2)})
	r.run(1, time.Minute, 5*time.Second)
	src.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")
	if dlq := r.receiveDLQ(); len(dlq) != 0 {
		t.Errorf("dead-lettered %d more messages: %v", len(dlq), dlq)
	}
	t.Logf("expired after 5 deferrals (%d second copies of it ended without a dead letter); the next change pushed both in %d OTA request(s)", fenced, len(r.ota.Accepted()))
}

// laneItem reads the lanes item of a property and kind straight from the
// state table.
func laneItem(t *testing.T, r *laneRig, pk string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := emulator.DynamoDB(t).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &r.stateTable, ConsistentRead: new(true),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: "lanes"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func attrN(v ddbtypes.AttributeValue) string {
	if n, ok := v.(*ddbtypes.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}
