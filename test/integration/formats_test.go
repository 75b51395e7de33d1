package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// wireRig is a pipeline whose one channel speaks a vendor's format to a
// mock OTA that maps only the room type "DBL".
type wireRig struct {
	p      *pipeline
	sy     *syncer.Syncer
	format string
	// plan is the rate plan availability changes name: none for Expedia
	// AR, which counts inventory per room type.
	plan string
}

func newWireRig(t *testing.T, format string) *wireRig {
	t.Helper()
	return newWireRigWith(t, format, nil)
}

// newWireRigWith is newWireRig with the mock OTA's config changed by vendor.
func newWireRigWith(t *testing.T, format string, vendor func(*mockota.Config)) *wireRig {
	t.Helper()
	lim := limiter.PerSecond(50, 20)
	ota := mockota.Config{Limit: lim, Wire: &mockota.Wire{Format: format, MappedRooms: []string{"DBL"}}}
	if vendor != nil {
		vendor(&ota)
	}
	p := newPipeline(t, lim, ota)
	cfg, err := config.Parse(fmt.Appendf(nil, `{
  "max_range_days": 62,
  "channels": {"ota": {
    "base_url": %q, "allow_http": true, "format": %q,
    "endpoints": {
      "availability": {"path": "/v1/availability", "limit": {"rate": 50, "burst": 20}},
      "rates": {"path": "/v1/rates", "limit": {"rate": 50, "burst": 20}}
    },
    "credentials": {"cred-1": {"token_env": "TEST_OTA_LOGIN"}}
  }},
  "properties": {"hotel-aurora": [{"channel": "ota", "credential": "cred-1", "hotel_ref": "H-1001"}]}
}`, p.ota.URL(), format))
	if err != nil {
		t.Fatal(err)
	}
	db := emulator.DynamoDB(t)
	stateTable := emulator.NewStateTable(t, db)
	sy := &syncer.Syncer{Config: cfg, State: &ari.Store{DB: db, Table: stateTable}, Lanes: &lane.Store{DB: db, Table: stateTable},
		Token: func(string) string { return "fleet-user:s3cret-pw" }, Linger: -1}
	d := p.dispatcher(workerOpts{})
	if err := handTo(sy, d); err != nil {
		t.Fatal(err)
	}
	plan := "BAR"
	if format == mockota.WireExpediaAR {
		plan = ""
	}
	return &wireRig{p: p, sy: sy, format: format, plan: plan}
}

// availability is a change of one room type's availability over from..to.
func (r *wireRig) availability(seq int64, room, from, to string, n int) string {
	detail, _ := json.Marshal(ari.Change{EventID: fmt.Sprintf("ev-%d", seq), PropertyID: "hotel-aurora", Sequence: seq, Kind: "availability",
		RoomType: room, RatePlan: r.plan, From: from, To: to, Values: map[string]any{"available": n}})
	return fmt.Sprintf(`{"version":"0","id":"ev-%d","detail-type":"ARI change","source":"pms","time":"2026-11-30T12:00:00Z","detail":%s}`, seq, detail)
}

// batch hands the changes to the syncer in one batch, so that they merge
// into one push of the lane, and returns the push's results.
func (r *wireRig) batch(t *testing.T, changes ...string) []dispatch.Result {
	t.Helper()
	msgs := make([]syncer.Message, len(changes))
	for i, c := range changes {
		msgs[i] = syncer.Message{ID: fmt.Sprint(i), Body: c}
	}
	var out []dispatch.Result
	for _, m := range r.sy.HandleBatch(context.Background(), msgs) {
		if m.Err != nil || m.Change.Invalid != "" {
			t.Fatalf("message %s: %v %s", m.ID, m.Err, m.Change.Invalid)
		}
		out = append(out, m.Jobs...)
	}
	return out
}

func total(rs []dispatch.Result) (sum dispatch.Result) {
	for _, r := range rs {
		sum.Pushes += r.Pushes
		sum.Refused += r.Refused
		sum.Isolation += r.Isolation
		sum.Attempts += r.Attempts
	}
	return sum
}

// refusedLetters are the dead letters of refused changes: element → reason.
func (r *wireRig) refusedLetters(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for body, reason := range r.p.receiveDLQ() {
		j, err := job.Decode(body)
		if err != nil {
			t.Fatalf("dead letter %q is not a job: %v", body, err)
		}
		var ref struct {
			Refused []string `json:"refused"`
		}
		if err := json.Unmarshal(j.Payload, &ref); err != nil || len(ref.Refused) != 1 {
			t.Fatalf("dead letter %s (%s) does not carry one refused change", body, reason)
		}
		if strings.Contains(body, "s3cret-pw") || strings.Contains(reason, "s3cret-pw") {
			t.Fatalf("dead letter carries the credential in clear: %s %s", body, reason)
		}
		out[ref.Refused[0]] = reason
	}
	return out
}

func (r *wireRig) copy(t *testing.T) *otacopy.Copy {
	t.Helper()
	c, err := otacopy.BuildWire(r.p.ota.Accepted(), r.format)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An OpenTravel vendor answers 200 with <Errors> for a room type it has
// not mapped: the change is refused, not delivered. It is dead-lettered
// with the vendor's error, and the OTA holds nothing of it.
func TestTwoHundredWithErrorIsARefusal(t *testing.T) {
	t.Parallel()
	r := newWireRig(t, mockota.WireOpenTravel)
	res := total(r.batch(t, r.availability(1, "SUI", "2026-12-01", "2026-12-03", 4)))
	if res.Pushes != 0 || res.Refused != 1 {
		t.Fatalf("push of an unmapped room type: %d delivered, %d refused; want 0 delivered, 1 refused", res.Pushes, res.Refused)
	}
	if n := len(r.p.ota.Accepted()); n != 0 {
		t.Fatalf("the OTA applied %d requests, want 0", n)
	}
	letters := r.refusedLetters(t)
	if len(letters) != 1 {
		t.Fatalf("dead letters %v, want the one refused change", letters)
	}
	for el, reason := range letters {
		if !strings.HasPrefix(el, "SUI#BAR#2026-12-01#2026-12-03#") || !strings.Contains(reason, "Room ID is not valid") {
			t.Fatalf("dead letter %s: %q, want the SUI change with the vendor's error", el, reason)
		}
	}
}

// isolationOfOneBadChange merges eleven changes into one push, one of them
// for an unmapped room type: the ten others reach the OTA (read with the
// independent decoder), exactly the bad one is dead-lettered with the
// vendor's error, and isolating it costs at most 2·⌈log₂ 11⌉ requests.
func isolationOfOneBadChange(t *testing.T, format, vendorError string) {
	r := newWireRig(t, format)
	var changes []string
	for i := range 11 {
		room := "DBL"
		if i == 6 {
			room = "SUI"
		}
		date := fmt.Sprintf("2026-12-%02d", i+1)
		changes = append(changes, r.availability(int64(i+1), room, date, date, i+1))
	}
	res := total(r.batch(t, changes...))
	if res.Refused != 1 {
		t.Fatalf("refused %d changes, want 1 (%+v)", res.Refused, res)
	}
	bound := 2 * int(math.Ceil(math.Log2(11)))
	if extra := len(r.p.ota.Requests()) - 1; extra > bound || res.Isolation > bound {
		t.Fatalf("%d extra requests (%d isolation parts) to isolate one bad change of 11, want at most %d", extra, res.Isolation, bound)
	}
	letters := r.refusedLetters(t)
	if len(letters) != 1 {
		t.Fatalf("dead letters %v, want exactly the bad change", letters)
	}
	for el, reason := range letters {
		if !strings.HasPrefix(el, "SUI#"+r.plan+"#2026-12-07#2026-12-07#") || !strings.Contains(reason, vendorError) {
			t.Fatalf("dead letter %s: %q, want the SUI change with the vendor's error %q", el, reason, vendorError)
		}
	}
	ota := r.copy(t)
	for i := range 11 {
		if i == 6 {
			continue
		}
		d := otacopy.Day{HotelRef: "H-1001", Kind: "availability", RoomType: "DBL", RatePlan: r.plan, Date: fmt.Sprintf("2026-12-%02d", i+1)}
		if _, ok := ota.ReachedValues(d, fmt.Sprintf(`{"available":%d}`, i+1)); !ok {
			h, _ := ota.Held(d)
			t.Fatalf("%s holds %+v at the OTA, want available %d", d.Date, h, i+1)
		}
	}
	t.Logf("%s: %d requests for 11 changes (%d isolation parts)", format, len(r.p.ota.Requests()), res.Isolation)
}

func TestOneBadChangeInAMergedPushOfElevenIsIsolated(t *testing.T) {
	t.Parallel()
	isolationOfOneBadChange(t, mockota.WireOpenTravel, "Room ID is not valid")
}

// Expedia's AR applies nothing of a message with an <Error>, even under
// HTTP 200, and names no item: the whole message is refused, and halving
// finds the bad change.
func TestExpediaARErrorIn200RefusesTheWholeMessage(t *testing.T) {
	t.Parallel()
	isolationOfOneBadChange(t, mockota.WireExpediaAR, "is not mapped")
}

// A change across a month boundary goes to an OpenTravel vendor as two
// requests, one per calendar month, both accepted; the lane is then clear.
func TestMonthSplitPush(t *testing.T) {
	t.Parallel()
	r := newWireRig(t, mockota.WireOpenTravel)
	res := total(r.batch(t, r.availability(1, "DBL", "2026-12-30", "2027-01-02", 5)))
	if res.Pushes != 2 || len(r.p.ota.Requests()) != 2 || len(r.p.ota.Accepted()) != 2 {
		t.Fatalf("%d pushes, %d requests (%d applied); want 2 requests, one per month, both applied", res.Pushes, len(r.p.ota.Requests()), len(r.p.ota.Accepted()))
	}
	ota := r.copy(t)
	for _, date := range []string{"2026-12-30", "2026-12-31", "2027-01-01", "2027-01-02"} {
		d := otacopy.Day{HotelRef: "H-1001", Kind: "availability", RoomType: "DBL", RatePlan: "BAR", Date: date}
		if _, ok := ota.ReachedValues(d, `{"available":5}`); !ok {
			t.Fatalf("%s did not reach the OTA", date)
		}
	}
	id := lane.ID{Property: "hotel-aurora", Kind: "availability", Channel: "ota", Credential: "cred-1", HotelRef: "H-1001"}
	p, err := r.sy.Lanes.Read(context.Background(), id)
	if err != nil {
		t.Fatalf("reading the lane back: %v", err)
	}
	if len(p.Elements) != 0 || p.Owner != "" {
		t.Fatalf("lane after both months were accepted: %+v, want clear and released", p)
	}
}

// A change the channel's format cannot express (Expedia AR counts
// inventory per room type, not per rate plan) is dead-lettered at once with
// the reason, spending no request; the change merged with it goes out, and
// the lane ends clear. A push of nothing but such changes sends nothing.
func TestUnexpressibleChangeIsDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	r := newWireRig(t, mockota.WireExpediaAR)
	good := r.availability(1, "DBL", "2026-12-01", "2026-12-02", 3)
	r.plan = "BAR"
	bad := r.availability(2, "TWN", "2026-12-01", "2026-12-01", 4)
	r.plan = ""
	res := total(r.batch(t, good, bad))
	if n := len(r.p.ota.Requests()); n != 1 || res.Pushes != 1 {
		t.Fatalf("%d requests, %d accepted; want the good change's one request", n, res.Pushes)
	}
	letters := r.refusedLetters(t)
	if len(letters) != 1 {
		t.Fatalf("dead letters %v, want the unexpressible change", letters)
	}
	for el, reason := range letters {
		if !strings.HasPrefix(el, "TWN#BAR#") || !strings.Contains(reason, "cannot express") {
			t.Fatalf("dead letter %s: %q, want the TWN change with the format's reason", el, reason)
		}
	}
	r.plan = "BAR"
	only := r.availability(3, "STE", "2026-12-05", "2026-12-05", 1)
	r.batch(t, only)
	if n := len(r.p.ota.Requests()); n != 1 {
		t.Fatalf("a push of only an unexpressible change sent %d requests, want none", n-1)
	}
	if letters := r.refusedLetters(t); len(letters) != 1 {
		t.Fatalf("dead letters %v, want the STE change", letters)
	}
	id := lane.ID{Property: "hotel-aurora", Kind: "availability", Channel: "ota", Credential: "cred-1", HotelRef: "H-1001"}
	p, err := r.sy.Lanes.Read(context.Background(), id)
	if err != nil || len(p.Elements) != 0 {
		t.Fatalf("lane after the unexpressible changes: %+v, %v; want nothing pending", p, err)
	}
}

// refusedWhole pushes three merged changes to a vendor that refuses
// something no change caused, and checks that nothing was taken apart or
// dead-lettered: one request, no isolation, no dead letter, nothing
// applied, and the lane still holding every change. It returns the
// push's results.
func refusedWhole(t *testing.T, r *wireRig) dispatch.Result {
	t.Helper()
	rs := r.batch(t,
		r.availability(1, "DBL", "2026-12-01", "2026-12-01", 1),
		r.availability(2, "DBL", "2026-12-05", "2026-12-05", 2),
		r.availability(3, "DBL", "2026-12-09", "2026-12-09", 3))
	var res dispatch.Result
	for _, x := range rs {
		res.Isolation += x.Isolation
		res.Refused += x.Refused
		res.Pushes += x.Pushes
		res.CredentialRefused = res.CredentialRefused || x.CredentialRefused
		res.HotelRefused = res.HotelRefused || x.HotelRefused
		if x.Outcome != dispatch.Deferred {
			t.Errorf("job %s: %s (%s), want deferred with its work", x.JobID, x.Outcome, x.Reason)
		}
	}
	if n := len(r.p.ota.Requests()); n != 1 || res.Isolation != 0 || res.Refused != 0 || res.Pushes != 0 {
		t.Fatalf("%d requests, %d isolation parts, %d changes refused, %d accepted; want the one request, nothing taken apart", n, res.Isolation, res.Refused, res.Pushes)
	}
	if n := len(r.p.ota.Accepted()); n != 0 {
		t.Fatalf("the OTA applied %d requests, want none", n)
	}
	if dead := r.p.receiveDLQ(); len(dead) != 0 {
		t.Fatalf("dead letters %v, want none: no change was at fault", dead)
	}
	id := lane.ID{Property: "hotel-aurora", Kind: "availability", Channel: "ota", Credential: "cred-1", HotelRef: "H-1001"}
	p, err := r.sy.Lanes.Read(context.Background(), id)
	if err != nil {
		t.Fatalf("reading the lane back: %v", err)
	}
	if n := len(p.Elements); n != 3 || p.Owner == "" {
		t.Fatalf("lane after the refusal: %d changes pending, owner %q; want all 3, held by the waiting job", n, p.Owner)
	}
	return res
}

// A vendor that refuses the login inside a 200 (Expedia AR's 1000s,
// OpenTravel's authentication errors) refuses the credential, not the
// changes: the push is not taken apart, nothing is dead-lettered, every
// change stays pending, and the credential's path is taken (its bucket
// paused fleet-wide, CredentialRefusals counted for its alarm).
func TestCredentialRefusalInsideA200KeepsEveryChange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, format string
		wire         func(*mockota.Wire)
	}{
		{"expedia-ar 1001", mockota.WireExpediaAR, func(*mockota.Wire) {}},
		{"opentravel authentication error (EWT 4)", mockota.WireOpenTravel, func(w *mockota.Wire) { w.CredentialInBody = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newWireRigWith(t, tt.format, func(c *mockota.Config) {
				c.Credentials = []string{"another-user"}
				tt.wire(c.Wire)
			})
			res := refusedWhole(t, r)
			if !res.CredentialRefused || res.HotelRefused {
				t.Fatalf("credential refused %v, hotel refused %v; want the credential's path", res.CredentialRefused, res.HotelRefused)
			}
			if got := r.p.ota.Requests()[0].Status; got != 200 {
				t.Fatalf("the vendor answered %d, want its refusal inside a 200", got)
			}
		})
	}
}

// A vendor that refuses the hotel (Booking.com's 403 for a hotel the
// account has no access to or that is no longer connected; Expedia's 403)
// refuses no change: the push is not taken apart, nothing is
// dead-lettered, every change stays pending, and the hotel's path is taken
// (the lane waits out a backoff, HotelRefusals counted for its alarm).
func TestHotelRefusalIsNotIsolated(t *testing.T) {
	t.Parallel()
	for _, format := range []string{mockota.WireOpenTravel, mockota.WireExpediaAR} {
		t.Run(format, func(t *testing.T) {
			r := newWireRigWith(t, format, func(c *mockota.Config) { c.Wire.DisconnectedHotels = []string{"H-1001"} })
			res := refusedWhole(t, r)
			if !res.HotelRefused || res.CredentialRefused {
				t.Fatalf("hotel refused %v, credential refused %v; want the hotel's path", res.HotelRefused, res.CredentialRefused)
			}
		})
	}
}
