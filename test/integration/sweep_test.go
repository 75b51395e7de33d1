package integration

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/cmd/fleetbucket/dlq"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// twoHotels is two properties on one credential, each one connection.
const twoHotels = `"hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1001"}],
    "hotel-borealis": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-2002"}]`

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

// The limiter's table is down for longer than a push job lives (here
// max_deferrals 5 at a 2 s store cooldown stands for DefaultPolicy's 200
// at 10 s, about 35 minutes, an hour's outage outlasting it), and no
// change arrives after it: every job expires, each lane keeps its
// changes, and once the store is back one sweep schedules every stranded
// lane, so that every lane ends fresh at the OTA without a new change.
func TestLimiterOutageOfAnHourEndsFresh(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, bookingConfig(lim, `, "max_deferrals": 5`, twoHotels))
	r.linger = -1
	r.downTable = r.table // only the limiter's table
	aurora, borealis := newPMS("hotel-aurora"), newPMS("hotel-borealis")
	var bodies []string
	for i, kind := range []string{"availability", "rates"} {
		bodies = append(bodies, aurora.change(kind, "DBL", "2027-03-01", "2027-03-04", 10+i))
		bodies = append(bodies, borealis.change(kind, "TWN", "2027-03-02", "2027-03-02", 20+i))
	}

	r.down.Store(true)
	r.enqueueBodies(bodies)
	r.run(2, 2*time.Minute, 5*time.Second)
	if n := len(r.ota.Requests()); n != 0 {
		t.Fatalf("the OTA got %d requests with the limiter's table down, want none", n)
	}
	expired := 0
	for _, res := range r.results {
		if res.Outcome == dispatch.Expired {
			expired++
		}
	}
	if expired != 4 {
		t.Fatalf("%d lane jobs expired, want all 4", expired)
	}
	for _, l := range []struct{ pk, suffix string }{
		{"hotel-aurora#availability", "booking_com#cred-1#BK-1001"}, {"hotel-aurora#rates", "booking_com#cred-1#BK-1001"},
		{"hotel-borealis#availability", "booking_com#cred-1#BK-2002"}, {"hotel-borealis#rates", "booking_com#cred-1#BK-2002"},
	} {
		if n := pendingIn(t, r, l.pk, l.suffix); n != 1 {
			t.Fatalf("lane %s %s has %d pending after its job expired, want its change", l.pk, l.suffix, n)
		}
	}
	r.receiveDLQ() // the expired jobs: the sweep, not a redrive, recovers here

	// The store is back; no change comes. The sweep finds the stranded
	// lanes in its index and schedules them.
	r.down.Store(false)
	rep := r.sweep()
	r.run(2, time.Minute, 5*time.Second)

	aurora.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")
	borealis.assertNewest(t, otaCopy(t, r.pipeline), "BK-2002")
	if rep.Lanes != 4 || rep.Items != 4 {
		t.Errorf("sweep: %+v, want the 4 stranded lanes of 4 items", rep)
	}
	if n := r.ota.Count429(); n != 0 {
		t.Errorf("the OTA answered %d requests 429, want none", n)
	}
	// Nothing is due right after: the index holds no lane to push again.
	if again := r.sweep(); again.Items != 0 || again.Lanes != 0 {
		t.Errorf("a second sweep right after found %+v, want nothing due", again)
	}
	t.Logf("4 jobs expired behind the outage; one sweep pushed all 4 lanes in %d OTA requests", len(r.ota.Accepted()))
}

// A lane job expires at its max_age (no slot before it: the bucket is
// booked past it) and is dead-lettered; the lane keeps its change. The
// sweep pushes it once a slot is free, with no new change; and the
// expired job, redriven afterwards, finds the lane served and pushes
// nothing more.
func TestExpiredLaneIsSweptAndPushed(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, oneHotelConfig(lim, ""))
	r.linger = -1
	r.tune = func(d *dispatch.Dispatcher) { d.Policy.MaxAge = 3 * time.Second }
	src := newPMS("hotel-aurora")
	ctx := context.Background()

	booked := time.Now().Add(6 * time.Second)
	if err := limiterFor(t, r).Penalize(ctx, limiter.Bucket{Key: "booking_com#cred-1#rates", Limit: lim}, booked); err != nil {
		t.Fatal(err)
	}
	out := r.worker().HandleBatch(ctx, []syncer.Message{{ID: "1", Body: src.change("rates", "DBL", "2027-04-01", "2027-04-02", 7)}})[0]
	if out.Err != nil || len(out.Jobs) != 1 || out.Jobs[0].Outcome != dispatch.Expired {
		t.Fatalf("change into a bucket booked past max_age: %+v, want its lane job expired", out)
	}
	if n := pendingIn(t, r, "hotel-aurora#rates", "booking_com#cred-1#BK-1001"); n != 1 {
		t.Fatalf("the expired lane has %d pending, want its change", n)
	}

	time.Sleep(time.Until(booked))
	rep := r.sweep()
	r.run(1, time.Minute, 5*time.Second)
	src.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")
	if rep.Lanes != 1 {
		t.Errorf("sweep: %+v, want the one stranded lane", rep)
	}
	pushes := len(r.ota.Accepted())

	if moved := r.redrive(); moved != 1 {
		t.Fatalf("redrive moved %d messages, want the expired job", moved)
	}
	r.run(1, time.Minute, 5*time.Second)
	if n := len(r.ota.Accepted()); n != pushes {
		t.Errorf("the redriven expired job pushed %d more, want none: the sweep served its lane", n-pushes)
	}
	if n := pendingIn(t, r, "hotel-aurora#rates", "booking_com#cred-1#BK-1001"); n != 0 {
		t.Errorf("the lane still has %d pending", n)
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

// The vendor answers 503 for longer than a job's retries (MaxFailures 2
// here; about 9 minutes with DefaultPolicy's 8). The jobs give up and are
// dead-lettered as lane references, and both lanes keep their changes.
// Once the vendor is back, the sweep pushes them with no new change.
func TestVendorOutageLongerThanRetriesLosesNothing(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, oneHotelConfig(lim, ""))
	r.linger = -1
	r.tune = func(d *dispatch.Dispatcher) {
		d.Policy.MaxFailures, d.Policy.FailureBackoff = 2, 500*time.Millisecond
	}
	stop := r.ota.FailMatching(503, func(mockota.Request) bool { return true })
	src := newPMS("hotel-aurora")
	r.enqueueBodies([]string{
		src.change("availability", "DBL", "2027-06-01", "2027-06-05", 1),
		src.change("rates", "DBL", "2027-06-03", "2027-06-03", 2),
	})
	r.run(1, 2*time.Minute, 5*time.Second)

	if n := len(r.ota.Accepted()); n != 0 {
		t.Fatalf("the OTA accepted %d pushes while down", n)
	}
	for _, kind := range []string{"availability", "rates"} {
		if n := pendingIn(t, r, "hotel-aurora#"+kind, "booking_com#cred-1#BK-1001"); n != 1 {
			t.Fatalf("%s lane has %d pending after its push gave up, want its change", kind, n)
		}
	}
	assertLaneDeadLetters(t, r.deadLetters(), 2,
		"hotel-aurora#availability#booking_com#cred-1#BK-1001", "hotel-aurora#rates#booking_com#cred-1#BK-1001")
	failed := len(r.ota.Requests())

	stop()
	if rep := r.sweep(); rep.Lanes != 2 {
		t.Fatalf("sweep: %+v, want both lanes", rep)
	}
	r.run(1, time.Minute, 5*time.Second)
	src.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")
	t.Logf("%d failed requests during the outage (%d answered 429); the sweep pushed both lanes in %d", failed, r.ota.Count429(), len(r.ota.Accepted()))
}

// A credential rotation goes wrong: the vendor refuses the new token with
// 401, and reading the secret again gives the same bad token. The pushes
// pause (the bucket is emptied for the fleet until each retry) and flag
// the refusal for the alarm; the jobs that give up are dead-lettered as
// lane references. No lane is cleared: once the credential is fixed, the
// sweep pushes every change.
func TestBadCredentialRotationLosesNothing(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow, Credentials: []string{"good"}},
		bookingConfig(lim, "", twoHotels))
	r.linger = -1
	var token atomic.Value
	token.Store("good")
	invalidated := atomic.Int64{}
	r.tune = func(d *dispatch.Dispatcher) {
		d.Policy.MaxFailures, d.Policy.FailureBackoff = 2, 500*time.Millisecond
	}
	r.tuneSyncer = func(sy *syncer.Syncer) {
		sy.Token = func(string) string { return token.Load().(string) }
		sy.Invalidate = func(string) { invalidated.Add(1) }
	}
	aurora, borealis := newPMS("hotel-aurora"), newPMS("hotel-borealis")
	r.enqueueBodies([]string{aurora.change("rates", "DBL", "2027-07-01", "2027-07-01", 1)})
	r.run(1, time.Minute, 5*time.Second)
	if n := len(r.ota.Accepted()); n != 1 {
		t.Fatalf("before the rotation the OTA accepted %d pushes, want 1", n)
	}

	token.Store("bad")
	r.enqueueBodies([]string{
		aurora.change("rates", "DBL", "2027-07-02", "2027-07-04", 2),
		borealis.change("rates", "TWN", "2027-07-02", "2027-07-02", 3),
	})
	r.run(2, 2*time.Minute, 5*time.Second)
	for _, l := range []struct{ pk, suffix string }{
		{"hotel-aurora#rates", "booking_com#cred-1#BK-1001"}, {"hotel-borealis#rates", "booking_com#cred-1#BK-2002"},
	} {
		if n := pendingIn(t, r, l.pk, l.suffix); n != 1 {
			t.Fatalf("lane %s has %d pending while its credential is refused, want its change kept", l.pk, n)
		}
	}
	unauthorized, flagged := 0, 0
	for _, q := range r.ota.Requests() {
		if q.Status == 401 {
			unauthorized++
		}
	}
	for _, res := range r.results {
		if res.CredentialRefused {
			flagged++
		}
	}
	if unauthorized == 0 || unauthorized > 2*3 || flagged == 0 || invalidated.Load() == 0 {
		t.Fatalf("%d requests refused 401, %d results flagged, %d refreshes; want 1–6 refusals (2 lanes, MaxFailures 2), flagged, the token refreshed", unauthorized, flagged, invalidated.Load())
	}
	assertLaneDeadLetters(t, r.deadLetters(), 2,
		"hotel-aurora#rates#booking_com#cred-1#BK-1001", "hotel-borealis#rates#booking_com#cred-1#BK-2002")

	token.Store("good")
	if rep := r.sweep(); rep.Lanes != 2 {
		t.Fatalf("sweep: %+v, want both lanes", rep)
	}
	r.run(1, time.Minute, 5*time.Second)
	ota := otaCopy(t, r.pipeline)
	aurora.assertNewest(t, ota, "BK-1001")
	borealis.assertNewest(t, ota, "BK-2002")
	t.Logf("%d requests refused 401 while the token was bad; after the fix the sweep pushed both lanes", unauthorized)
}
