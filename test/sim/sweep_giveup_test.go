package sim

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// The vendor answers 503 for longer than a job's retries (MaxFailures 2
// here; about 9 minutes with DefaultPolicy's 8). The jobs give up and are
// dead-lettered as lane references, and both lanes keep their changes.
// Once the vendor is back, the sweep pushes them with no new change.
func TestVendorOutageLongerThanRetriesLosesNothing(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, connconfig.Booking(lim, "", auroraBK1001),
		func(d *dispatch.Dispatcher) { d.Policy.MaxFailures, d.Policy.FailureBackoff = 2, 500*time.Millisecond })
	stop := m.ota.FailMatching(503, func(mockota.Request) bool { return true })
	src := newPMSOracle("hotel-aurora")
	m.changes([]string{
		src.change("availability", "DBL", "2027-06-01", "2027-06-05", 1),
		src.change("rates", "DBL", "2027-06-03", "2027-06-03", 2),
	}, 10)
	m.drain(100)

	if n := len(m.ota.Accepted()); n != 0 {
		t.Fatalf("the OTA accepted %d pushes while down", n)
	}
	for _, kind := range []string{"availability", "rates"} {
		if n := pendingLen(t, m, "hotel-aurora#"+kind, "booking_com#cred-1#BK-1001"); n != 1 {
			t.Fatalf("%s lane has %d pending after its push gave up, want its change", kind, n)
		}
	}
	assertLaneDeadLetters(t, m.sent.deadLetters(deadURL), 2,
		"hotel-aurora#availability#booking_com#cred-1#BK-1001", "hotel-aurora#rates#booking_com#cred-1#BK-1001")
	failed := len(m.ota.Requests())

	stop()
	if rep := m.sweep(); rep.Lanes != 2 {
		t.Fatalf("sweep: %+v, want both lanes", rep)
	}
	m.drain(100)
	src.assertNewest(t, m.ota, "BK-1001")
	if dlq := m.sent.deadLetters(deadURL); len(dlq) != 0 {
		t.Errorf("after the sweep %d messages were dead-lettered: %v", len(dlq), reasons(dlq))
	}
	t.Logf("%d failed requests during the outage (%d answered 429); the sweep pushed both lanes in %d", failed, m.ota.Count429(), len(m.ota.Accepted()))
}

// A credential rotation goes wrong: the vendor refuses the new token with
// 401, and reading the secret again gives the same bad token. The pushes
// pause (the bucket is emptied for the fleet until each retry) and flag
// the refusal for the alarm; the jobs that give up are dead-lettered as
// lane references. No lane is cleared: once the credential is fixed, the
// sweep pushes every change.
func TestBadCredentialRotationLosesNothing(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	m := newMemLanes(t, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow, Credentials: []string{"good"}}, connconfig.Booking(lim, "", twoHotels),
		func(d *dispatch.Dispatcher) { d.Policy.MaxFailures, d.Policy.FailureBackoff = 2, 500*time.Millisecond })
	var token atomic.Value
	token.Store("good")
	invalidated := atomic.Int64{}
	m.sy.Token = func(string) string { return token.Load().(string) }
	m.sy.Invalidate = func(string) { invalidated.Add(1) }
	aurora, borealis := newPMSOracle("hotel-aurora"), newPMSOracle("hotel-borealis")
	m.changes([]string{aurora.change("rates", "DBL", "2027-07-01", "2027-07-01", 1)}, 10)
	m.drain(100)
	if n := len(m.ota.Accepted()); n != 1 {
		t.Fatalf("before the rotation the OTA accepted %d pushes, want 1", n)
	}

	token.Store("bad")
	m.changes([]string{
		aurora.change("rates", "DBL", "2027-07-02", "2027-07-04", 2),
		borealis.change("rates", "TWN", "2027-07-02", "2027-07-02", 3),
	}, 10)
	m.drain(100)
	for _, l := range []struct{ pk, suffix string }{
		{"hotel-aurora#rates", "booking_com#cred-1#BK-1001"}, {"hotel-borealis#rates", "booking_com#cred-1#BK-2002"},
	} {
		if n := pendingLen(t, m, l.pk, l.suffix); n != 1 {
			t.Fatalf("lane %s has %d pending while its credential is refused, want its change kept", l.pk, n)
		}
	}
	unauthorized, flagged := 0, 0
	for _, q := range m.ota.Requests() {
		if q.Status == 401 {
			unauthorized++
		}
	}
	for _, res := range m.results {
		if res.CredentialRefused {
			flagged++
		}
	}
	if unauthorized == 0 || unauthorized > 2*3 || flagged == 0 || invalidated.Load() == 0 {
		t.Fatalf("%d requests refused 401, %d results flagged, %d refreshes; want 1–6 refusals (2 lanes, MaxFailures 2), flagged, the token refreshed", unauthorized, flagged, invalidated.Load())
	}
	assertLaneDeadLetters(t, m.sent.deadLetters(deadURL), 2,
		"hotel-aurora#rates#booking_com#cred-1#BK-1001", "hotel-borealis#rates#booking_com#cred-1#BK-2002")

	token.Store("good")
	if rep := m.sweep(); rep.Lanes != 2 {
		t.Fatalf("sweep: %+v, want both lanes", rep)
	}
	m.drain(100)
	aurora.assertNewest(t, m.ota, "BK-1001")
	borealis.assertNewest(t, m.ota, "BK-2002")
	t.Logf("%d requests refused 401 while the token was bad; after the fix the sweep pushed both lanes", unauthorized)
}

// pendingLen is how many elements a lane has pending, read raw from its
// item (pk property#kind; suffix channel#credential#hotel_ref).
func pendingLen(t *testing.T, m *memLanes, pk, suffix string) int {
	t.Helper()
	set, _ := memLaneItem(t, m.store, pk)["d:"+suffix].(*types.AttributeValueMemberSS)
	if set == nil {
		return 0
	}
	return len(set.Value)
}

// assertLaneDeadLetters checks that every dead letter (body → reason) is a
// push job naming one of the lanes (property#kind#channel#credential#
// hotel_ref), which is what lets a redrive push the lane again.
func assertLaneDeadLetters(t *testing.T, dlq map[string]string, want int, lanes ...string) {
	t.Helper()
	if len(dlq) != want {
		t.Fatalf("dead-letter queue holds %d messages, want %d: %v", len(dlq), want, reasons(dlq))
	}
	for body, reason := range dlq {
		j, err := job.Decode(body)
		if err != nil {
			t.Fatalf("dead letter (%s) is not a push job a redrive can move back (%v): %.200s", reason, err, body)
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
