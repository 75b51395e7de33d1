package integration

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/cmd/fleetbucket/dlq"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// pendingIn is how many elements a lane has pending, read raw from its
// item (pk property#kind; suffix channel#credential#hotel_ref).
func pendingIn(t *testing.T, r *laneRig, pk, suffix string) int {
	t.Helper()
	set, _ := laneItem(t, r, pk)["d:"+suffix].(*ddbtypes.AttributeValueMemberSS)
	if set == nil {
		return 0
	}
	return len(set.Value)
}

// sweep runs one sweep with a fresh worker, as the scheduled invocation
// would, and fails the test on an error.
func (r *laneRig) sweep() syncer.SweepReport {
	r.t.Helper()
	rep, err := r.worker().Sweep(context.Background())
	if err != nil {
		r.t.Fatalf("sweep: %v", err)
	}
	r.mu.Lock()
	r.results = append(r.results, rep.Results...)
	r.mu.Unlock()
	return rep
}

// deadLetters lists the dead-letter queue without removing anything.
func (r *laneRig) deadLetters() []dlq.Message {
	r.t.Helper()
	msgs, err := dlq.Reader{SQS: r.sqs, URL: r.dlqURL, Wait: time.Second}.List(context.Background(), 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return msgs
}

// redrive moves the dead-letter queue back as `fleetbucket dlq redrive`
// does, and returns how many messages moved.
func (r *laneRig) redrive() int {
	r.t.Helper()
	moves, err := dlq.Redrive{Reader: dlq.Reader{SQS: r.sqs, URL: r.dlqURL, Wait: time.Second},
		Queues: dlq.Queues{DLQ: r.dlqURL, Changes: r.changesURL, Deferred: r.deferredURL}}.Run(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	moved := 0
	for _, m := range moves {
		if m.Moved {
			moved++
		}
	}
	return moved
}

// assertLaneDeadLetters checks that every dead letter is a push job naming
// one of the lanes (property#kind#channel#credential#hotel_ref), which is
// what lets a redrive push the lane again.
func assertLaneDeadLetters(t *testing.T, msgs []dlq.Message, want int, lanes ...string) {
	t.Helper()
	if len(msgs) != want {
		t.Fatalf("dead-letter queue holds %d messages, want %d", len(msgs), want)
	}
	for _, m := range msgs {
		j, err := job.Decode(m.Body)
		if m.Kind != dlq.Job || err != nil {
			t.Fatalf("dead letter %s is a %s (%v), want a push job a redrive can move back: %.200s", m.ID, m.Kind, err, m.Body)
		}
		named := false
		for _, l := range lanes {
			named = named || strings.HasPrefix(j.ID, l+"@")
		}
		if !named {
			t.Fatalf("dead-lettered job %s names none of the lanes %v", j.ID, lanes)
		}
	}
}

// The vendor refuses a merged lane push (400: one of its room types is
// not mapped) and names nothing. The push is taken apart until the refused
// change is alone (format.Isolate): the two good changes arrive, and only
// the refused one is dead-lettered, as a job naming its lane and carrying
// the change, and leaves the lane's pending set, so no sweep pushes it
// again and again. Once the mapping is fixed, `dlq redrive` marks the lane
// with it again, and it arrives.
func TestRefusedLanePushKeepsItsChanges(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(10, 5)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, oneHotelConfig(lim, ""))
	r.linger = 500 * time.Millisecond // the three changes merge into one push
	r.lease = 5 * time.Second
	stop := r.ota.FailMatching(400, func(q mockota.Request) bool { return bytes.Contains(q.Body, []byte(`"room_type":"BAD"`)) })
	src := newPMS("hotel-aurora")
	const lane = "hotel-aurora#rates#booking_com#cred-1#BK-1001"
	const pk, suffix = "hotel-aurora#rates", "booking_com#cred-1#BK-1001"

	ctx := context.Background()
	msgs := []syncer.Message{
		{ID: "1", Body: src.change("rates", "DBL", "2027-05-01", "2027-05-03", 1)},
		{ID: "2", Body: src.change("rates", "BAD", "2027-05-01", "2027-05-01", 2)},
		{ID: "3", Body: src.change("rates", "TWN", "2027-05-02", "2027-05-02", 3)},
	}
	for _, out := range r.worker().HandleBatch(ctx, msgs) {
		if out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	r.run(1, time.Minute, 5*time.Second)
	// One merged push, then halves until the bad change is alone:
	// 2·⌈log₂ 3⌉ = 4 more at most.
	if n := len(r.ota.Requests()); n < 2 || n > 5 {
		t.Fatalf("the OTA got %d requests, want the merged push and at most 4 to isolate the refused change", n)
	}
	if n := pendingIn(t, r, pk, suffix); n != 0 {
		t.Fatalf("after the isolation the lane has %d pending, want none: the good changes delivered, the bad one dead-lettered", n)
	}
	letters := r.deadLetters()
	assertLaneDeadLetters(t, letters, 1, lane)
	if !strings.Contains(letters[0].Body, "BAD#") || !strings.Contains(letters[0].Reason, "injected failure") {
		t.Fatalf("dead letter %.300s (%s), want the BAD change with the vendor's error", letters[0].Body, letters[0].Reason)
	}
	if rep := r.sweep(); rep.Lanes != 0 {
		t.Fatalf("a sweep after the isolation took up %+v, want none: nothing is pending", rep)
	}

	// The operator maps the room type and redrives.
	stop()
	requests := len(r.ota.Requests())
	if moved := r.redrive(); moved != 1 {
		t.Fatalf("redrive moved %d messages, want the refused change", moved)
	}
	r.run(1, time.Minute, 5*time.Second)
	src.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")
	if n := len(r.ota.Requests()) - requests; n != 1 {
		t.Errorf("the redriven change took %d requests, want 1", n)
	}
	if n := pendingIn(t, r, pk, suffix); n != 0 {
		t.Errorf("the lane still has %d pending", n)
	}
}
