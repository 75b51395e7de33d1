package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
	"github.com/fleetbucket/fleetbucket/test/poller"
)

// switchableDB is a real emulator client that an outage switch fails:
// every call, or with table set only the calls on that table.
type switchableDB struct {
	*dynamodb.Client
	down  *atomic.Bool
	table string
}

var errStoreDown = errors.New("injected: DynamoDB unreachable")

func (s switchableDB) failing(tables ...string) bool {
	if !s.down.Load() {
		return false
	}
	return s.table == "" || slices.Contains(tables, s.table)
}

func (s switchableDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if s.failing(aws.ToString(in.TableName)) {
		return nil, errStoreDown
	}
	return s.Client.UpdateItem(ctx, in, o...)
}

func (s switchableDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if s.failing(aws.ToString(in.TableName)) {
		return nil, errStoreDown
	}
	return s.Client.GetItem(ctx, in, o...)
}

func (s switchableDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if s.failing(slices.Collect(maps.Keys(in.RequestItems))...) {
		return nil, errStoreDown
	}
	return s.Client.BatchGetItem(ctx, in, o...)
}

// laneRig is the whole sync pipeline on the emulators: PMS events on the
// changes queue, sync workers (each its own clients and limiter) on both
// queues, lanes and ARI state in DynamoDB, and the mock OTA.
type laneRig struct {
	*pipeline
	cfg        *config.Config
	stateTable string
	down       atomic.Bool
	linger     time.Duration
	lease      time.Duration
	// feeding keeps run going while the test still sends changes.
	feeding atomic.Bool
	// downTable, if set, limits the outage down switches on to that
	// table; tune adjusts each worker's dispatcher, tuneSyncer its
	// syncer. A test sets them before run.
	downTable  string
	tune       func(*dispatch.Dispatcher)
	tuneSyncer func(*syncer.Syncer)

	mu      sync.Mutex
	results []dispatch.Result
}

func newLaneRig(t *testing.T, lim limiter.Limit, ota mockota.Config, configJSON func(otaURL string) string) *laneRig {
	t.Helper()
	r := &laneRig{pipeline: newPipeline(t, lim, ota)}
	cfg, err := config.Parse([]byte(configJSON(r.ota.URL())))
	if err != nil {
		t.Fatal(err)
	}
	r.cfg, r.stateTable = cfg, emulator.NewStateTable(t, emulator.DynamoDB(t))
	return r
}

// handTo makes d the dispatcher sy hands its jobs to, as pipeline.New
// does: d's capabilities read afresh from its parts (a tune may have
// replaced its limiter), checked against what sy's routes need.
func handTo(sy *syncer.Syncer, d *dispatch.Dispatcher) error {
	sy.Dispatcher = d
	d.Can = dispatch.CapabilitiesOf(d.Limiter)
	d.Needs = d.Needs.Or(sy.Needs())
	return d.Validate()
}

func (r *laneRig) worker() *syncer.Syncer {
	db := switchableDB{Client: emulator.DynamoDB(r.t), down: &r.down, table: r.downTable}
	sy := &syncer.Syncer{Config: r.cfg, State: &ari.Store{DB: db, Table: r.stateTable}, Lanes: &lane.Store{DB: db, Table: r.stateTable, Lease: r.lease},
		Token: func(string) string { return "tok" }, Linger: r.linger}
	policy := dispatch.DefaultPolicy
	policy.BlockThreshold = 2 * time.Second // moto's deliveries run late (see dispatcher)
	policy.StoreCooldown = 2 * time.Second
	d := r.dispatcher(workerOpts{db: db, policy: policy})
	if r.tune != nil {
		r.tune(d)
	}
	if r.tuneSyncer != nil {
		r.tuneSyncer(sy)
	}
	if err := handTo(sy, d); err != nil {
		r.t.Fatal(err)
	}
	return sy
}

// run works both queues with n workers each until both are empty (in
// flight and delayed included) or the timeout.
func (r *laneRig) run(n int, timeout time.Duration, visibility time.Duration) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, q := range []struct {
		url      string
		deferred bool
	}{{r.changesURL, false}, {r.deferredURL, true}} {
		pool := make(chan *syncer.Syncer, n)
		for range n {
			pool <- r.worker()
		}
		pl := &poller.Poller{SQS: r.sqs, QueueURL: q.url, Visibility: visibility, Concurrency: n, ShortPoll: 20 * time.Millisecond,
			Handler: r.handler(pool, q.deferred)}
		wg.Go(func() { pl.Run(ctx) })
	}
	// Done once both queues stay empty for a while: moto's queue counts
	// can read zero for a moment while a deferral is on its way (a run
	// that stopped there left an expired job undelivered).
	for emptySince := (time.Time{}); ctx.Err() == nil; sleep(ctx, 200*time.Millisecond) {
		if r.feeding.Load() || r.depth(r.changesURL)+r.depth(r.deferredURL) > 0 {
			emptySince = time.Time{}
			continue
		}
		if emptySince.IsZero() {
			emptySince = time.Now()
		}
		if time.Since(emptySince) >= 3*time.Second {
			break
		}
	}
	if ctx.Err() != nil {
		r.t.Errorf("the pipeline did not drain within %v", timeout)
	}
	cancel()
	wg.Wait()
}

func (r *laneRig) handler(pool chan *syncer.Syncer, deferred bool) poller.Handler {
	return func(ctx context.Context, msgs []sqstypes.Message) ([]string, error) {
		sy := <-pool
		defer func() { pool <- sy }()
		batch := make([]syncer.Message, len(msgs))
		for i, m := range msgs {
			batch[i] = syncer.Message{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Deferred: deferred,
				Redelivered: m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)] > "1"}
		}
		var failed []string
		for _, out := range sy.HandleBatch(ctx, batch) {
			if out.Err != nil {
				failed = append(failed, out.ID)
			}
			r.mu.Lock()
			r.results = append(r.results, out.Jobs...)
			r.mu.Unlock()
		}
		return failed, nil
	}
}

// pms is the test's PMS: it numbers one property's changes and remembers
// the newest value of every date, the oracle the OTA's copy is checked
// against.
type pms struct {
	property string
	seq      int64
	newest   map[otacopy.Day]otacopy.Held
	bodies   []string
}

func newPMS(property string) *pms {
	return &pms{property: property, newest: map[otacopy.Day]otacopy.Held{}}
}

func (p *pms) change(kind, room, from, to string, value int) string {
	p.seq++
	c := ari.Change{EventID: fmt.Sprintf("%s-ev-%d", p.property, p.seq), PropertyID: p.property, Sequence: p.seq, Kind: kind,
		RoomType: room, RatePlan: "BAR", From: from, To: to, Values: map[string]any{"v": value}}
	for _, d := range c.Dates() {
		k := otacopy.Day{HotelRef: p.property, Kind: kind, RoomType: room, RatePlan: "BAR", Date: d}
		if p.newest[k].Sequence < c.Sequence {
			p.newest[k] = otacopy.Held{Sequence: c.Sequence, Values: otacopy.Values(c.Values)}
		}
	}
	body := changeEvent(c.EventID, c.Sequence, kind, from, to, c.Values)
	body = replaceProperty(body, p.property)
	body = replaceRoom(body, room)
	p.bodies = append(p.bodies, body)
	return body
}

func replaceRoom(body, room string) string {
	return replaceFirst(body, `"room_type":"DBL"`, `"room_type":"`+room+`"`)
}

func replaceFirst(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

// assertNewest checks every date the PMS changed against the OTA's copy.
func (p *pms) assertNewest(t *testing.T, ota *otacopy.Copy, hotelRef string) {
	t.Helper()
	stale := 0
	for k, want := range p.newest {
		k.HotelRef = hotelRef
		got, ok := ota.Held(k)
		if !ok || got.Sequence != want.Sequence || got.Values != want.Values {
			stale++
			if stale <= 5 {
				t.Errorf("%+v: the OTA holds %+v, want sequence %d %s", k, got, want.Sequence, want.Values)
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d of %d dates stale at the OTA", stale, len(p.newest))
	}
}

func oneHotelConfig(lim limiter.Limit, extra string) func(string) string {
	return connconfig.Booking(lim, extra, `"hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1001"}]`)
}

// A change's push job delivered twice, in one batch or in two, reaches the
// OTA once; two changes that share an event id are both pushed; and a
// property connected twice to one channel and credential is pushed to
// both of its hotel refs.
func TestDuplicatesSendOnceAndDistinctWorkIsNeverDropped(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(20, 10)
	config := func(url string) string {
		return fmt.Sprintf(`{
  "channels": {"booking_com": {"base_url": %q, "allow_http": true,
    "endpoints": {"availability": {"path": "/v1/availability", "limit": {"rate": 20, "burst": 10}}},
    "credentials": {"cred-1": {"token_env": "T"}}}},
  "properties": {"hotel-aurora": [
    {"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1"},
    {"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-2"}]}
}`, url)
	}
	r := newLaneRig(t, lim, mockota.Config{Limit: lim}, config)
	r.linger = -1
	ctx := context.Background()
	sy := r.worker()

	// Two changes sharing one event id, in one batch.
	dbl := changeEvent("ev-shared", 1, "availability", "2026-12-01", "2026-12-01", map[string]any{"a": 1})
	sgl := replaceRoom(changeEvent("ev-shared", 2, "availability", "2026-12-10", "2026-12-10", map[string]any{"a": 2}), "SGL")
	outs := sy.HandleBatch(ctx, []syncer.Message{{ID: "1", Body: dbl}, {ID: "2", Body: sgl}})
	for _, out := range outs {
		if out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	ota := otaCopy(t, r.pipeline)
	for _, ref := range []string{"BK-1", "BK-2"} {
		for _, d := range []otacopy.Day{
			{HotelRef: ref, Kind: "availability", RoomType: "DBL", RatePlan: "BAR", Date: "2026-12-01"},
			{HotelRef: ref, Kind: "availability", RoomType: "SGL", RatePlan: "BAR", Date: "2026-12-10"},
		} {
			if _, ok := ota.Held(d); !ok {
				t.Errorf("%+v never reached the OTA", d)
			}
		}
	}

	// A lane job delivered twice: make one by deferring a lane's push
	// (its bucket emptied), then deliver the deferred message twice.
	before := len(r.ota.Accepted())
	if err := limiterFor(t, r).Penalize(ctx, limiter.Bucket{Key: "booking_com#cred-1#availability", Limit: lim}, time.Now().Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	late := changeEvent("ev-late", 3, "availability", "2026-12-02", "2026-12-02", map[string]any{"a": 3})
	out := sy.HandleBatch(ctx, []syncer.Message{{ID: "3", Body: late}})[0]
	if out.Err != nil || len(out.Jobs) != 2 || out.Jobs[0].Outcome != dispatch.Deferred {
		t.Fatalf("change into an emptied bucket: %+v, want both lanes' jobs deferred", out)
	}
	deferred := r.receiveAll(r.deferredURL, 2)
	twice := []syncer.Message{{ID: "a", Body: deferred[0], Deferred: true}, {ID: "b", Body: deferred[0], Deferred: true}}
	time.Sleep(time.Until(out.Jobs[0].Slot))
	sy.HandleBatch(ctx, twice)                                                          // the same batch
	sy.HandleBatch(ctx, []syncer.Message{{ID: "c", Body: deferred[0], Deferred: true}}) // and a later one
	sy.HandleBatch(ctx, []syncer.Message{{ID: "d", Body: deferred[1], Deferred: true}})
	pushes := map[string]int{}
	for _, a := range r.ota.Accepted()[before:] {
		pushes[string(a.Body)]++
	}
	if got := len(r.ota.Accepted()) - before; got != 2 {
		t.Errorf("after the duplicates the OTA received %d pushes, want 2 (one per hotel ref)", got)
	}
	ota = otaCopy(t, r.pipeline)
	for _, ref := range []string{"BK-1", "BK-2"} {
		if h, ok := ota.Held(otacopy.Day{HotelRef: ref, Kind: "availability", RoomType: "DBL", RatePlan: "BAR", Date: "2026-12-02"}); !ok || h.Sequence != 3 {
			t.Errorf("%s 12-02: %+v, want sequence 3", ref, h)
		}
	}
}

func limiterFor(t *testing.T, r *laneRig) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(emulator.DynamoDB(t), limiter.WithTable(r.table))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// receiveAll takes n messages off a queue (waiting for delayed ones) and
// deletes them, returning their bodies.
func (p *pipeline) receiveAll(url string, n int) []string {
	p.t.Helper()
	var bodies []string
	deadline := time.Now().Add(30 * time.Second)
	for len(bodies) < n && time.Now().Before(deadline) {
		out, err := p.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, VisibilityTimeout: 60})
		if err != nil {
			p.t.Fatal(err)
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			if _, err := p.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				p.t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(bodies) != n {
		p.t.Fatalf("received %d messages from %s, want %d", len(bodies), url, n)
	}
	return bodies
}

// A sharded endpoint goes through the same pipeline: slots are booked in
// one shard each (ReserveSharded), the vendor's limit holds for the whole
// bucket, and the OTA ends at the newest state.
func TestShardedEndpointThroughThePipeline(t *testing.T) {
	lim := limiter.PerSecond(10, 4)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim, Enforce: mockota.EnforceWindow}, oneHotelConfig(lim, `, "shards": 2`))
	r.linger = 100 * time.Millisecond
	src := newPMS("hotel-aurora")
	for i := range 40 {
		day := time.Date(2027, 1, 1+i%20, 0, 0, 0, 0, time.UTC).Format(ari.DateLayout)
		src.change([]string{"availability", "rates"}[i%2], "DBL", day, day, i)
	}
	r.feeding.Store(true)
	go func() {
		defer r.feeding.Store(false)
		for _, b := range src.bodies {
			r.enqueueBodies([]string{b})
			time.Sleep(50 * time.Millisecond)
		}
	}()
	r.run(3, 2*time.Minute, 30*time.Second)

	src.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")
	lm := limiterFor(t, r)
	assertVendorKeptItsWindow(t, r.ota, "tok", "availability", "rates")
	for _, ep := range []string{"availability", "rates"} {
		// The slots came from the shards, never from the plain key.
		used := 0
		for i := range 2 {
			key := limiter.ShardKey("booking_com#cred-1#"+ep, i)
			st, err := lm.State(context.Background(), limiter.Bucket{Key: key, Limit: limiter.PerSecond(5, 2)})
			if err != nil {
				t.Fatal(err)
			}
			if !st.TAT.IsZero() {
				used++
			}
		}
		plain, err := lm.State(context.Background(), limiter.Bucket{Key: "booking_com#cred-1#" + ep, Limit: lim})
		if err != nil || used == 0 || !plain.TAT.IsZero() {
			t.Errorf("%s: %d shards used, plain bucket %+v (%v); want the shards used and the plain key untouched", ep, used, plain, err)
		}
	}
	t.Logf("%d changes → %d OTA requests", len(src.bodies), len(r.ota.Requests()))
}

// A worker that dies after marking a lane (it owns the lane now) but
// before scheduling its push loses nothing: the queue hands the change out
// again, and the redelivered change, finding the lane owned by someone
// else, schedules a recheck that takes the lane over once the dead
// owner's lease has run out.
func TestCrashAfterMarkIsRecoveredByTheRedelivery(t *testing.T) {
	t.Parallel()
	lim := limiter.PerSecond(10, 5)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim}, oneHotelConfig(lim, ""))
	r.linger, r.lease = -1, 2*time.Second
	ctx := context.Background()
	src := newPMS("hotel-aurora")
	body := src.change("rates", "DBL", "2027-01-05", "2027-01-07", 1)

	// The first delivery applies and marks, then its worker dies: the lane
	// is owned by a token no job carries.
	sy := r.worker()
	c, err := ari.Parse(body, 31)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sy.State.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	id := lane.ID{Property: "hotel-aurora", Kind: "rates", Channel: "booking_com", Credential: "cred-1", HotelRef: "BK-1001"}
	el := lane.Element{RoomType: "DBL", RatePlan: "BAR", From: c.From, To: c.To, Sequence: 1}
	if _, err := sy.Lanes.Mark(ctx, []lane.ID{id}, []lane.Element{el}, func(lane.ID) string { return "died-with-the-worker" }); err != nil {
		t.Fatal(err)
	}
	// The redelivery.
	out := sy.HandleBatch(ctx, []syncer.Message{{ID: "1", Body: body, Redelivered: true}})[0]
	if out.Err != nil || len(out.Jobs) != 1 || out.Jobs[0].Outcome != dispatch.Deferred {
		t.Fatalf("redelivered change: %+v, want one recheck job deferred", out)
	}
	r.run(1, time.Minute, 30*time.Second)
	src.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")

	// Without the redelivery flag, nothing would have been scheduled.
	r2 := newLaneRig(t, lim, mockota.Config{Limit: lim}, oneHotelConfig(lim, ""))
	r2.lease = time.Minute
	sy2 := r2.worker()
	if _, err := sy2.Lanes.Mark(ctx, []lane.ID{id}, []lane.Element{el}, func(lane.ID) string { return "alive" }); err != nil {
		t.Fatal(err)
	}
	if out := sy2.HandleBatch(ctx, []syncer.Message{{ID: "1", Body: body}})[0]; len(out.Jobs) != 0 {
		t.Fatalf("a first delivery into an owned lane scheduled %+v, want nothing (the owner pushes it)", out.Jobs)
	}
}
