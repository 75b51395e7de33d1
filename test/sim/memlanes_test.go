package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// memLanes is the sync pipeline of one worker (syncer, dispatcher,
// limiter, lanes and ARI state) on the in-memory DynamoDB and a manual
// clock that the vendor shares, with the test as both queues: changes
// arrive when the test says, and every deferred job comes back at its
// slot (or its due time), earliest first. Sleeps move the clock.
type memLanes struct {
	t       *testing.T
	clock   *limitertest.Clock
	store   *DB
	ota     *mockota.Server
	sent    *sentMessages
	config  *config.Config // the connections every worker of m serves
	sy      *syncer.Syncer
	results []dispatch.Result
	pending []job.Job // deferred jobs not yet delivered
	n       int       // messages handed to the syncer
	// limiterDown fails every call on the limiter's table while set.
	limiterDown atomic.Bool
}

var errLimiterDown = errors.New("injected: the limiter's table is unreachable")

// outage is the limiter's view of the store: every call fails while down
// is set.
type outage struct {
	*DB
	down *atomic.Bool
}

func (o outage) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if o.down.Load() {
		return nil, errLimiterDown
	}
	return o.DB.UpdateItem(ctx, in, opts...)
}

func (o outage) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if o.down.Load() {
		return nil, errLimiterDown
	}
	return o.DB.GetItem(ctx, in, opts...)
}

func (o outage) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if o.down.Load() {
		return nil, errLimiterDown
	}
	return o.DB.BatchGetItem(ctx, in, opts...)
}

func (o outage) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if o.down.Load() {
		return nil, errLimiterDown
	}
	return o.DB.TransactWriteItems(ctx, in, opts...)
}

// newMemLanes wires one worker; config is the connections JSON given the
// vendor's URL, and tune, if set, adjusts the dispatcher.
func newMemLanes(t *testing.T, ota mockota.Config, configJSON func(url string) string, tune func(*dispatch.Dispatcher)) *memLanes {
	t.Helper()
	m := &memLanes{t: t, clock: newClock(), store: memStore(t), sent: &sentMessages{}}
	ota.Now = m.clock.Now
	m.ota = startOTA(t, ota)
	cfg, err := config.Parse([]byte(configJSON(m.ota.URL())))
	if err != nil {
		t.Fatal(err)
	}
	m.config = cfg
	m.sy = m.worker(&lane.Store{DB: m.store, Table: "state", Now: m.clock.Now}, func(_ *syncer.Syncer, d *dispatch.Dispatcher) {
		if tune != nil {
			tune(d)
		}
	})
	return m
}

// worker is a worker of its own on m's store, clock, vendor and queues: a
// limiter (out while m.limiterDown is set), a pusher that sleeps on m's
// clock, a dispatcher, and a syncer of m's connections on lanes. tune, if
// set, adjusts the syncer and the dispatcher before they are handed to
// each other, so that what it swaps in is what the capabilities are read
// from. Workers that share m share its store and vendor, as a fleet's
// processes share the table and the OTA.
func (m *memLanes) worker(lanes *lane.Store, tune func(*syncer.Syncer, *dispatch.Dispatcher)) *syncer.Syncer {
	m.t.Helper()
	lim, err := limiter.New(outage{m.store, &m.limiterDown}, limiter.WithTable("limits"), limiter.WithClock(m.clock.Now),
		limiter.WithCircuitBreaker(3, 5*time.Second))
	if err != nil {
		m.t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	push, err := otapush.New(nil, lim, otapush.DefaultPolicy, otapush.WithClock(m.clock.Now), otapush.WithLogger(quiet),
		otapush.WithSleep(m.sleep))
	if err != nil {
		m.t.Fatal(err)
	}
	sy := &syncer.Syncer{Config: m.config, State: &ari.Store{DB: m.store, Table: "state"}, Lanes: lanes,
		Token: func(string) string { return "tok" }, Linger: -1, Now: m.clock.Now}
	d := &dispatch.Dispatcher{Limiter: lim, Pusher: push, Policy: dispatch.DefaultPolicy, Now: m.clock.Now, Log: quiet, Fence: lim.FirstAfter,
		Sleep: m.sleep, Queue: &queue.Queue{SQS: m.sent, DeferredURL: deferredURL, DeadURL: deadURL, Now: m.clock.Now}}
	if tune != nil {
		tune(sy, d)
	}
	if err := handTo(sy, d); err != nil {
		m.t.Fatal(err)
	}
	return sy
}

// handTo makes d the dispatcher sy hands its jobs to, as pipeline.New
// does: d's capabilities read from its parts as tuned, checked against
// what sy's routes need.
func handTo(sy *syncer.Syncer, d *dispatch.Dispatcher) error {
	sy.Dispatcher = d
	d.Can = dispatch.CapabilitiesOf(d.Limiter)
	d.Needs = d.Needs.Or(sy.Needs())
	return d.Validate()
}

func (m *memLanes) sleep(ctx context.Context, d time.Duration) error {
	if d > 0 {
		m.clock.Advance(d)
	}
	return ctx.Err()
}

// bookRates books booking_com's rates bucket of cred-1 (of limit lim)
// until d from now, as a vendor's silence does, so that the next change's
// lane job waits for it: deferred, or expired past its max_age. It returns
// when the bucket is free again.
func (m *memLanes) bookRates(lim limiter.Limit, d time.Duration) time.Time {
	m.t.Helper()
	pen, err := limiter.New(m.store, limiter.WithTable("limits"), limiter.WithClock(m.clock.Now))
	if err != nil {
		m.t.Fatal(err)
	}
	booked := m.clock.Now().Add(d)
	if err := pen.Penalize(context.Background(), limiter.Bucket{Key: "booking_com#cred-1#rates", Limit: lim}, booked); err != nil {
		m.t.Fatal(err)
	}
	return booked
}

// handle hands msgs to the syncer as one batch, fails the test on an
// error, and keeps what it deferred.
func (m *memLanes) handle(msgs []syncer.Message) {
	m.t.Helper()
	for _, out := range m.sy.HandleBatch(context.Background(), msgs) {
		if out.Err != nil {
			m.t.Fatalf("message %s: %v", out.ID, out.Err)
		}
		m.results = append(m.results, out.Jobs...)
	}
	m.pending = append(m.pending, m.sent.takeJobs(m.t, deferredURL)...)
}

// changes hands bodies to the syncer in batches of size, as the changes
// queue does.
func (m *memLanes) changes(bodies []string, size int) {
	m.t.Helper()
	for b := 0; b < len(bodies); b += size {
		var msgs []syncer.Message
		for _, body := range bodies[b:min(b+size, len(bodies))] {
			m.n++
			msgs = append(msgs, syncer.Message{ID: fmt.Sprint(m.n), Body: body})
		}
		m.handle(msgs)
	}
}

// nextDue is when the earliest deferred job comes back (zero: none).
func (m *memLanes) nextDue() time.Time {
	sort.SliceStable(m.pending, func(i, j int) bool { return deliverAt(m.pending[i]).Before(deliverAt(m.pending[j])) })
	if len(m.pending) == 0 {
		return time.Time{}
	}
	return deliverAt(m.pending[0])
}

// deliverNext hands the earliest deferred job back, at its time.
func (m *memLanes) deliverNext() {
	m.t.Helper()
	at := m.nextDue()
	j := m.pending[0]
	m.pending = m.pending[1:]
	if at.After(m.clock.Now()) {
		m.clock.Set(at)
	}
	body, err := job.Encode(j)
	if err != nil {
		m.t.Fatal(err)
	}
	m.n++
	m.handle([]syncer.Message{{ID: fmt.Sprint(m.n), Body: body, Deferred: true}})
}

// drain delivers deferred jobs until none is left, failing after limit
// deliveries.
func (m *memLanes) drain(limit int) {
	m.t.Helper()
	for i := 0; len(m.pending) > 0; i++ {
		if i >= limit {
			m.t.Fatalf("%d jobs still deferred after %d deliveries", len(m.pending), limit)
		}
		m.deliverNext()
	}
}

const auroraBK1001 = `"hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1001"}]`
