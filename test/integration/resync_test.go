package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fleetbucket/fleetbucket/cmd/fleetbucket/cli"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// newResyncRig is a connections rig whose OpenTravel mock OTA knows the
// room types DBL and SUI.
func newResyncRig(t *testing.T) *connRig {
	t.Helper()
	r := newWireRigWith(t, mockota.WireOpenTravel, func(c *mockota.Config) { c.Wire.MappedRooms = []string{"DBL", "SUI"} })
	db := emulator.DynamoDB(t)
	clock := newClock()
	store := &connections.Store{DB: db, Table: emulator.NewConnectionsTable(t, db), Config: r.sy.Config, Now: clock.Now}
	cache := &connections.Cache{Source: store, Config: r.sy.Config, Now: clock.Now}
	r.sy.Connections = cache
	return &connRig{wireRig: r, store: store, cache: cache, clock: clock, t0: clock.Now()}
}

// cli runs the fleetbucket CLI against the rig's tables and changes queue.
// The rig's clock moves past every cache's age (r.at) at once, so a
// connection's resync waits on the queue a second, not the CLI's default.
func (r *connRig) cli(t *testing.T, args ...string) string {
	t.Helper()
	return r.cliWith(t, time.Second, args...)
}

// cliWith is cli with the resync a connection's write sends held on the
// queue for triggerDelay (0: the CLI's default).
func (r *connRig) cliWith(t *testing.T, triggerDelay time.Duration, args ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "connections.json")
	cfg := fmt.Sprintf(`{"channels": {"ota": {"base_url": %q, "allow_http": true, "format": "opentravel",
  "endpoints": {"availability": {"path": "/v1/availability", "limit": {"rate": 50, "burst": 20}}},
  "credentials": {"cred-1": {"token_env": "TEST_OTA_LOGIN"}}}}}`, r.p.ota.URL())
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{contract.EnvConnectionsTable: r.store.Table, contract.EnvConnections: file, contract.EnvChangesQueueURL: r.p.changesURL}
	awsCfg := emulator.Config(t)
	var stdout, stderr bytes.Buffer
	app := &cli.App{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return env[k] },
		AWSConfig:       func(context.Context) (aws.Config, error) { return awsCfg, nil },
		DynamoDBOptions: []func(*dynamodb.Options){emulator.ForEmulator}, TriggerDelay: triggerDelay}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code := app.Main(ctx, args); code != 0 {
		t.Fatalf("fleetbucket %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

// A change to a room type the connection does not map is dead-lettered;
// once the operator maps it (connections put), the cells the fix made new
// are pushed with their stored state, without a redrive and without a new
// change, and the cells the mapping already covered are not pushed again.
func TestMappingFixResyncsTheAffectedCells(t *testing.T) {
	r := newResyncRig(t)
	// The CLI resyncs a year from today: the change is for a date in it.
	day := time.Now().UTC().AddDate(0, 0, 3).Format("2006-01-02")
	r.put(t, connections.Connection{PropertyID: "hotel-aurora", Property: config.Property{Channel: "ota", Credential: "cred-1", HotelRef: "H-1001",
		RoomTypes: map[string]string{"SUI-PMS": "SUI"}, RatePlans: map[string]string{"BAR-PMS": "BAR"}}})
	out := r.handle(t,
		syncer.Message{ID: "1", Body: r.change(1, "hotel-aurora", "SUI-PMS", "BAR-PMS", "2026-12-01", 2)},
		syncer.Message{ID: "2", Body: r.change(2, "hotel-aurora", "DBL-PMS", "BAR-PMS", day, 4)})
	if n := len(r.p.ota.Requests()); n != 1 || out[1].Change.Invalid != "" {
		t.Fatalf("before the fix the vendor got %d requests, want 1 (the mapped SUI change); change 2: %+v", n, out[1].Change)
	}
	if letters := r.p.receiveDLQ(); len(letters) != 1 {
		t.Fatalf("dead letters %v, want the unmapped DBL-PMS change", letters)
	}

	said := r.cli(t, "connections", "put", "hotel-aurora", "ota", "--credential", "cred-1", "--hotel-ref", "H-1001",
		"--room-type", "SUI-PMS=SUI", "--room-type", "DBL-PMS=DBL", "--rate-plan", "BAR-PMS=BAR")
	if !strings.Contains(said, "DBL-PMS/BAR-PMS") {
		t.Errorf("the put did not say it resyncs DBL-PMS/BAR-PMS: %s", said)
	}
	r.at(connections.DefaultMaxAge) // every worker's cache has the fix
	bodies := r.p.receiveAll(r.p.changesURL, 1)
	res := r.handle(t, syncer.Message{ID: "3", Body: bodies[0]})
	if rs := res[0].Change.Resync; rs == nil || rs.Dates != 1 || rs.Cells != 1 {
		t.Fatalf("the resync event made %+v pending, want the one stored date of DBL-PMS/BAR-PMS", res[0].Change.Resync)
	}

	reqs := r.p.ota.Requests()
	if len(reqs) != 2 {
		t.Fatalf("after the fix the vendor got %d requests, want 2 (the resync's one push); results %+v", len(reqs), res[0].Jobs)
	}
	if body := string(reqs[1].Body); strings.Contains(body, "SUI") {
		t.Errorf("the resync pushed the SUI cell again, which the mapping already covered: %s", body)
	}
	held, ok := r.copy(t).Held(otacopy.Day{HotelRef: "H-1001", Kind: "availability", RoomType: "DBL", RatePlan: "BAR", Date: day})
	if !ok || !strings.Contains(held.Values, "4") {
		t.Fatalf("the OTA holds %+v (found %v) for DBL/BAR on %s, want the stored availability 4", held, ok, day)
	}
}

// The resync a mapping fix sends waits on the changes queue until every
// worker's cache of connections holds the fix: a worker whose cache still
// held the mapping from before it would skip, as unmapped, the very cells
// the fix mapped, and never push them (adversary seed 820: a mapping put
// back, its resync skipping every cell of the code it mapped).
func TestMappingFixResyncWaitsForEveryWorkersCache(t *testing.T) {
	r := newResyncRig(t)
	r.put(t, connections.Connection{PropertyID: "hotel-aurora", Property: config.Property{Channel: "ota", Credential: "cred-1", HotelRef: "H-1001",
		RoomTypes: map[string]string{"SUI-PMS": "SUI"}, RatePlans: map[string]string{"BAR-PMS": "BAR"}}})
	said := r.cliWith(t, 0, "connections", "put", "hotel-aurora", "ota", "--credential", "cred-1", "--hotel-ref", "H-1001",
		"--room-type", "SUI-PMS=SUI", "--room-type", "DBL-PMS=DBL", "--rate-plan", "BAR-PMS=BAR")
	if want := "taken up in 1m1s"; !strings.Contains(said, want) {
		t.Errorf("the put said %q, want %q", said, want)
	}
	out, err := r.p.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &r.p.changesURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 0 {
		t.Fatalf("the resync was on the changes queue at once (%s); want it held until every cache of connections is %v old", aws.ToString(out.Messages[0].Body), connections.DefaultMaxAge)
	}
	attrs, err := r.p.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &r.p.changesURL,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		t.Fatal(err)
	}
	if n := attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)]; n != "1" {
		t.Fatalf("%s messages delayed on the changes queue, want the resync", n)
	}
}

// bulkRig is a pipeline on the emulators whose every clock is the test's
// (the syncer's, the lanes', the limiter's, the queue's): slots are
// exact, and a job whose slot is not now is deferred (MaxHold 1 ms), never
// slept for. Properties hotel-0..hotel-(n-1) and hotel-live connect to one
// channel whose availability bucket they share; the mock OTA's own limit
// is far above the bucket's, so it never throttles.
type bulkRig struct {
	p     *pipeline
	sy    *syncer.Syncer
	clock *limitertest.Clock
	limit limiter.Limit
	seq   int64
}

func newBulkRig(t *testing.T, hotels int, limit limiter.Limit) *bulkRig {
	t.Helper()
	clock := newClock()
	p := newPipeline(t, limit, mockota.Config{Limit: limiter.PerSecond(1000, 1000), Now: clock.Now,
		Wire: &mockota.Wire{Format: mockota.WireOpenTravel, MappedRooms: []string{"DBL", "SUI"}}})
	props := []string{`"hotel-live": [{"channel": "ota", "credential": "cred-1", "hotel_ref": "H-LIVE"}]`}
	for i := range hotels {
		props = append(props, fmt.Sprintf(`"hotel-%d": [{"channel": "ota", "credential": "cred-1", "hotel_ref": "H-%d"}]`, i, i))
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `{
  "max_range_days": 62,
  "channels": {"ota": {
    "base_url": %q, "allow_http": true, "format": "opentravel",
    "endpoints": {"availability": {"path": "/v1/availability", "limit": {"rate": %g, "burst": %d}}},
    "credentials": {"cred-1": {"token_env": "TEST_OTA_LOGIN"}}
  }},
  "properties": {%s}
}`, p.ota.URL(), limit.Rate, limit.Burst, strings.Join(props, ",\n")))
	if err != nil {
		t.Fatal(err)
	}
	db := emulator.DynamoDB(t)
	stateTable := emulator.NewStateTable(t, db)
	sy := &syncer.Syncer{Config: cfg, State: &ari.Store{DB: db, Table: stateTable}, Lanes: &lane.Store{DB: db, Table: stateTable, Now: clock.Now},
		Token: func(string) string { return "fleet-user:s3cret-pw" }, Linger: -1, Now: clock.Now}
	policy := dispatch.DefaultPolicy
	policy.MaxHold = time.Millisecond
	// Time passes only when a worker waits: a push's later message that
	// waits for a free token moves the test's clock on.
	sleep := clock.Sleep
	lim, err := limiter.New(emulator.DynamoDB(t), limiter.WithTable(p.table), limiter.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	push, err := otapush.New(nil, lim, otapush.DefaultPolicy, otapush.WithClock(clock.Now), otapush.WithSleep(sleep), otapush.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	d := &dispatch.Dispatcher{Limiter: lim, Pusher: push, Policy: policy, Now: clock.Now, Sleep: sleep, Log: quiet, Fence: lim.FirstAfter,
		Queue: &queue.Queue{SQS: emulator.SQS(t), DeferredURL: p.deferredURL, DeadURL: p.dlqURL, Now: clock.Now}}
	if err := handTo(sy, d); err != nil {
		t.Fatal(err)
	}
	return &bulkRig{p: p, sy: sy, clock: clock, limit: limit}
}

func (r *bulkRig) change(hotel, room, from, to string, n int) ari.Change {
	r.seq++
	return ari.Change{EventID: fmt.Sprintf("ev-%d", r.seq), PropertyID: hotel, Sequence: r.seq, Kind: "availability",
		RoomType: room, RatePlan: "BAR", From: from, To: to, Values: map[string]any{"available": n}}
}

func changeBody(c ari.Change) string {
	detail, _ := json.Marshal(c)
	return fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"ARI change","source":"pms","time":"2026-11-30T12:00:00Z","detail":%s}`, c.EventID, detail)
}

// store writes c's state without marking a lane: what the PMS sent before.
func (r *bulkRig) store(t *testing.T, c ari.Change) {
	t.Helper()
	if _, err := r.sy.State.Apply(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

func (r *bulkRig) resyncBody(t *testing.T, hotel, from, to string) string {
	t.Helper()
	body, err := ari.Resync{ResyncID: "rs-" + hotel, PropertyID: hotel, From: from, To: to,
		Cells: []ari.ResyncCell{{RoomType: "DBL", RatePlan: "BAR"}, {RoomType: "SUI", RatePlan: "BAR"}}}.Event(r.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func (r *bulkRig) handle(t *testing.T, msgs ...syncer.Message) []syncer.MessageResult {
	t.Helper()
	out := r.sy.HandleBatch(context.Background(), msgs)
	for _, m := range out {
		if m.Err != nil || m.Change.Invalid != "" {
			t.Fatalf("message %s: %v %s", m.ID, m.Err, m.Change.Invalid)
		}
	}
	return out
}

// drainDeferred hands back the deferred jobs on the queue, once each; a
// deferral is delayed in real time by what it waits on the test's clock
// (a tenth of a second, a few for a lease's recheck), so it waits up to
// 1.5 s for those.
func (r *bulkRig) drainDeferred(t *testing.T) int {
	t.Helper()
	n := 0
	until := time.Now().Add(1500 * time.Millisecond)
	for {
		out, err := r.p.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &r.p.deferredURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 0})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			if r.p.depth(r.p.deferredURL) == 0 || time.Now().After(until) {
				return n
			}
			time.Sleep(50 * time.Millisecond) // a deferral's real delay: the test's clock does not run
			continue
		}
		msgs := make([]syncer.Message, len(out.Messages))
		for i, m := range out.Messages {
			msgs[i] = syncer.Message{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Deferred: true}
			if _, err := r.p.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &r.p.deferredURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
		r.handle(t, msgs...)
		n += len(msgs)
	}
}

// Hotels resyncing while live changes arrive on the same bucket: every
// live push gets a slot at most one interval after its change, however
// many bulk pushes wait (a bulk push books only a token free at once, so
// at most one is ever booked ahead of a live one), and the bulk still
// drains, every stored cell and date reaching the OTA. The clock is the
// test's, so a slot is exact; the oracle is the interval of the config's
// limit and, for the drain, the OTA's copy rebuilt from what it accepted.
func TestResyncNeverDelaysALivePushByMoreThanOnePush(t *testing.T) {
	const hotels = 6
	lim := limiter.PerSecond(10, 2) // T = 100 ms
	r := newBulkRig(t, hotels, lim)
	T := time.Duration(float64(time.Second) / lim.Rate)
	for i := range hotels {
		h := fmt.Sprintf("hotel-%d", i)
		r.store(t, r.change(h, "DBL", "2027-01-01", "2027-01-20", 3))
		r.store(t, r.change(h, "SUI", "2027-01-10", "2027-02-05", 1))
	}
	var msgs []syncer.Message
	for i := range hotels {
		msgs = append(msgs, syncer.Message{ID: fmt.Sprint(i), Body: r.resyncBody(t, fmt.Sprintf("hotel-%d", i), "2027-01-01", "2027-03-31")})
	}
	r.handle(t, msgs...)

	rng := rand.New(rand.NewPCG(29, 3))
	var worst time.Duration
	for round := range 25 {
		now := r.clock.Now()
		c := r.change("hotel-live", "DBL", "2027-01-05", "2027-01-05", round)
		out := r.handle(t, syncer.Message{ID: "live", Body: changeBody(c)})
		if len(out[0].Jobs) != 1 {
			t.Fatalf("round %d: the live change made %d jobs, want its lane's push", round, len(out[0].Jobs))
		}
		res := out[0].Jobs[0]
		wait := res.Slot.Sub(now)
		worst = max(worst, wait)
		if res.Slot.IsZero() || wait > T {
			reqs := r.p.ota.Requests()
			for _, q := range reqs[max(0, len(reqs)-8):] {
				t.Logf("OTA got %s at %v", q.JobID, q.At.Sub(now))
			}
			t.Fatalf("round %d: the live push's slot is %v after its change (outcome %s, %s), want at most one interval (%v): it waited behind more than one bulk push",
				round, wait, res.Outcome, res.Reason, T)
		}
		if res.Outcome == dispatch.Deferred {
			r.clock.Set(res.Slot) // the live push comes back at its slot
			r.drainDeferred(t)
		}
		// Live changes come at most one per two intervals: alone, each
		// would find a token free at once.
		r.clock.Set(now.Add(2*T + time.Duration(rng.IntN(3))*T/2))
		r.drainDeferred(t)
	}
	for range 200 { // let the bulk finish
		r.clock.Advance(T)
		if r.drainDeferred(t) == 0 {
			break
		}
	}
	copy, err := otacopy.BuildWire(r.p.ota.Accepted(), mockota.WireOpenTravel)
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for i := range hotels {
		for _, cell := range []struct{ room, from, to string }{{"DBL", "2027-01-01", "2027-01-20"}, {"SUI", "2027-01-10", "2027-02-05"}} {
			for _, d := range (ari.Change{From: cell.from, To: cell.to}).Dates() {
				if _, ok := copy.Held(otacopy.Day{HotelRef: fmt.Sprintf("H-%d", i), Kind: "availability", RoomType: cell.room, RatePlan: "BAR", Date: d}); !ok {
					missing++
				}
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d stored dates of the resynced hotels never reached the OTA", missing)
	}
	// The vendor's window, on its own arrival log: no second holds more
	// than the limit's rate and burst.
	acc := r.p.ota.Accepted()
	var first, lastBulk time.Time
	bulk, live := 0, 0
	for i, q := range acc {
		in := 0
		for _, o := range acc[i:] {
			if o.At.Sub(q.At) < time.Second {
				in++
			}
		}
		if in > int(lim.Rate)+lim.Burst {
			t.Fatalf("the OTA took %d requests in the second from %v, more than %g/s with burst %d", in, q.At, lim.Rate, lim.Burst)
		}
		if first.IsZero() {
			first = q.At
		}
		if strings.Contains(q.JobID, "@b-") {
			bulk, lastBulk = bulk+1, q.At
		}
	}
	for _, q := range acc {
		if !strings.Contains(q.JobID, "@b-") && !q.At.After(lastBulk) {
			live++
		}
	}
	left := float64(lastBulk.Sub(first))/float64(T) + 1 - float64(live)
	t.Logf("worst live wait %v (interval %v); bulk: %d requests in %v beside %d live ones, %.0f%% of the %.0f tokens live left",
		worst, T, bulk, lastBulk.Sub(first), live, 100*float64(bulk)/left, left)
}

// A worker that marked a resync's lanes and died before any push (its
// message then comes back from the changes queue) loses nothing: the
// redelivery finds the lanes owned by the dead worker's token and comes
// back when that lease runs out, takes them over and pushes every stored
// date once; none twice, as nothing had gone out.
func TestResyncSurvivesAWorkerDeath(t *testing.T) {
	lim := limiter.PerSecond(10, 2)
	r := newBulkRig(t, 1, lim)
	const lease = 3 * time.Second // the real delay of the recheck's deferral
	r.sy.Lanes.Lease = lease
	r.store(t, r.change("hotel-0", "DBL", "2027-01-01", "2027-01-31", 3))
	r.store(t, r.change("hotel-0", "SUI", "2027-01-20", "2027-02-10", 1))
	body := r.resyncBody(t, "hotel-0", "2027-01-01", "2027-03-31")
	rs, err := ari.ParseResync(body)
	if err != nil {
		t.Fatal(err)
	}
	// The first delivery marks and dies: its bulk jobs never run.
	tasks, rep, err := r.sy.Resync(context.Background(), rs, false)
	if err != nil || len(tasks) != 1 || rep.Dates != 31+22 {
		t.Fatalf("the first delivery: %d tasks, report %+v, err %v; want one lane's push of 53 dates", len(tasks), rep, err)
	}
	// The queue hands the message out again after its visibility timeout.
	out := r.handle(t, syncer.Message{ID: "again", Body: body, Redelivered: true})
	if n := len(r.p.ota.Requests()); n != 0 {
		t.Fatalf("the redelivery pushed %d requests while the dead worker's lease held the lane, want 0 (results %+v)", n, out[0].Jobs)
	}
	r.clock.Advance(lease + 2*time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for len(r.p.ota.Accepted()) < 2 && time.Now().Before(deadline) {
		r.drainDeferred(t)
		r.clock.Advance(time.Second)
	}
	copy, err := otacopy.BuildWire(r.p.ota.Accepted(), mockota.WireOpenTravel)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[otacopy.Day]int{}
	for _, q := range r.p.ota.Accepted() {
		one, err := otacopy.BuildWire([]mockota.Request{q}, mockota.WireOpenTravel)
		if err != nil {
			t.Fatal(err)
		}
		for _, cell := range []struct{ room, from, to string }{{"DBL", "2027-01-01", "2027-01-31"}, {"SUI", "2027-01-20", "2027-02-10"}} {
			for _, d := range (ari.Change{From: cell.from, To: cell.to}).Dates() {
				if _, ok := one.Held(otacopy.Day{HotelRef: "H-0", Kind: "availability", RoomType: cell.room, RatePlan: "BAR", Date: d}); ok {
					seen[otacopy.Day{RoomType: cell.room, Date: d}]++
				}
			}
		}
	}
	for _, cell := range []struct{ room, from, to string }{{"DBL", "2027-01-01", "2027-01-31"}, {"SUI", "2027-01-20", "2027-02-10"}} {
		for _, d := range (ari.Change{From: cell.from, To: cell.to}).Dates() {
			if _, ok := copy.Held(otacopy.Day{HotelRef: "H-0", Kind: "availability", RoomType: cell.room, RatePlan: "BAR", Date: d}); !ok {
				t.Fatalf("%s on %s never reached the OTA after the worker died (%d requests accepted)", cell.room, d, len(r.p.ota.Accepted()))
			}
			if n := seen[otacopy.Day{RoomType: cell.room, Date: d}]; n != 1 {
				t.Fatalf("%s on %s reached the OTA %d times, want once: nothing had gone out before the death", cell.room, d, n)
			}
		}
	}
}
