package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
	"github.com/fleetbucket/fleetbucket/test/poller"
)

// channel is one mock OTA: its endpoints, and in the priority scenario
// the meter they share.
type channel struct {
	name      string
	endpoints []string
	// meter, if set, is the one vendor meter (and path) all the
	// endpoints count against, with availability urgent.
	meter string
	// wire is the vendor format the channel speaks (-format wire): the
	// mock's mockota.Wire and the config's "format".
	wire string
}

// formatOf is the channel's message format in this run: its wire format,
// or json.
func (c channel) formatOf(o options) string {
	if o.format == "wire" && c.wire != "" {
		return c.wire
	}
	return "json"
}

// mappedRooms are the room types the mock OTAs have mapped; poisonRoom is
// one they have not.
var mappedRooms = []string{"DBL", "TWN", "STE"}

const poisonRoom = "PSN"

// meterOf is the vendor meter (the mock's endpoint path) ep counts against.
func (c channel) meterOf(ep string) string {
	if c.meter != "" {
		return c.meter
	}
	return ep
}

// meters lists the channel's meters, in order.
func (c channel) meters() []string {
	if c.meter != "" {
		return []string{c.meter}
	}
	return c.endpoints
}

// channels are the demo's OTAs: two with an endpoint per kind by default;
// with -stopsells, one whose availability and rates share one meter that
// keeps half its burst for urgent pushes (stop-sells).
var channels = []channel{
	{name: "booking_com", endpoints: []string{"availability", "rates", "restrictions"}, wire: mockota.WireOpenTravel},
	{name: "expedia", endpoints: []string{"availability", "rates"}, wire: mockota.WireExpediaAR},
}

var priorityChannels = []channel{{name: "booking_com", endpoints: []string{"availability", "rates"}, meter: "ari"}}

const properties = 5

// tally is what the workers saw, for the report.
type tally struct {
	mu                    sync.Mutex
	outcomes              map[dispatch.Outcome]int
	pushes, items, wasted int
	lateness              []time.Duration
	// refused counts the dead letters of refused changes, isolation the
	// requests spent isolating them, warnings the vendors' warnings.
	refused, isolation, warnings int
	limiterCalls, stateCalls     atomic.Int64
	failed                       atomic.Int64
	// swept counts the lanes the sweeper took over: left dirty with no
	// job on its way.
	swept atomic.Int64
	// receivedAgain counts the messages handed to a worker a second time
	// or more: each had been left for redelivery (failed), or received
	// without reaching a worker, and came back after the visibility
	// timeout.
	receivedAgain atomic.Int64
	storeLatency  []time.Duration // every DynamoDB call's
	storeAt       []time.Time     // when each was answered
	start         time.Time       // when the producer began
	trace         *tracer         // nil unless -trace
	ops           map[string]int  // state calls by kind
}

func (t *tally) op(kind string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ops == nil {
		t.ops = map[string]int{}
	}
	t.ops[kind]++
}

func (t *tally) storeCall(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.storeLatency, t.storeAt = append(t.storeLatency, d), append(t.storeAt, time.Now())
}

func (t *tally) add(rs []syncer.MessageResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range rs {
		if r.Err != nil {
			t.failed.Add(1)
		}
		if r.Change.Invalid != "" {
			t.outcomes[dispatch.DeadLettered]++
		}
		for _, j := range r.Jobs {
			t.outcomes[j.Outcome]++
			t.pushes += j.Pushes
			t.items += j.Items
			t.wasted += j.WastedSlots
			t.refused += j.Refused
			t.isolation += j.Isolation
			t.warnings += j.Warnings
			if j.Delayed != 0 || j.Lateness != 0 {
				t.lateness = append(t.lateness, j.Lateness)
			}
		}
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.stopsells > 0 {
		// Its one shared meter is one vendor path for every kind, which
		// only the JSON body says apart.
		channels, o.format = priorityChannels, "json"
	}
	st, err := newStack(ctx)
	if err != nil {
		return err
	}
	defer st.close()
	lim := gcra.Limit{Rate: o.rate, Burst: o.burst}
	otas := map[string]*mockota.Server{}
	for _, ch := range channels {
		mc := mockota.Config{Limit: lim}
		if f := ch.formatOf(o); f != "json" {
			mc.Wire = &mockota.Wire{Format: f, MappedRooms: mappedRooms}
		}
		srv, err := mockota.Start(mc)
		if err != nil {
			return fmt.Errorf("start mock OTA %s: %w", ch.name, err)
		}
		defer srv.Close()
		otas[ch.name] = srv
	}
	cfg, err := config.Parse([]byte(connectionsJSON(o, otas, lim)))
	if err != nil {
		return err
	}
	if o.stopsells > 0 {
		fmt.Fprintf(out, "pipelinedemo: %d rate changes over %v and %g stop-sells per second for %d properties → %d sync workers → 1 mock OTA whose availability and rates share one meter (%g req/s, burst %d, %d kept for urgent pushes)\n",
			o.events, o.duration, o.stopsells, properties, o.workers, o.rate, o.burst, o.burst/2)
	} else {
		fmt.Fprintf(out, "pipelinedemo: %d PMS events (%d poisoned) over %v for %d properties → %d sync workers → 2 mock OTAs (booking_com %s, expedia %s; %g req/s, burst %d per credential and endpoint)\n",
			o.events, o.poison, o.duration, properties, o.workers, channels[0].formatOf(o), channels[1].formatOf(o), o.rate, o.burst)
	}

	t := &tally{outcomes: map[dispatch.Outcome]int{}}
	if t.trace, err = newTracer(o.trace); err != nil {
		return err
	}
	defer t.trace.close()
	tr := &truth{newest: map[otacopy.Day]struct {
		seq    int64
		values string
	}{}}
	// The resync hotel's past is written before the run's clock starts:
	// on a busy emulator it takes a while.
	var rs *resyncRun
	if o.resync {
		seeded, err := seedResync(ctx, st, tr)
		if err != nil {
			return err
		}
		rs = &resyncRun{seeded: seeded}
	}
	runCtx, cancel := context.WithTimeout(ctx, o.duration+2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, q := range []struct {
		url      string
		deferred bool
	}{{st.changesURL, false}, {st.deferredURL, true}} {
		// Each queue's event source mapping has its own concurrency.
		pool := make(chan *syncer.Syncer, o.workers)
		for range o.workers {
			sy, err := newWorker(st, cfg, t, o)
			if err != nil {
				return err
			}
			pool <- sy
		}
		name := map[bool]string{false: "changes", true: "deferred"}[q.deferred]
		onError := func(err error) { fmt.Fprintf(os.Stderr, "pipelinedemo: %s queue poller: %v\n", name, err) }
		pl := &poller.Poller{SQS: pollerClient(st.sqs, t.trace, name, onError), QueueURL: q.url, Visibility: 60 * time.Second, Concurrency: o.workers,
			ShortPoll: 20 * time.Millisecond, Handler: handler(pool, q.deferred, t),
			// A receive whose answer is lost hides its messages for
			// lostAnswerVisibility (shortReceiver), and a failed delete
			// hands them out again after the visibility timeout: a
			// change a minute late.
			OnError: onError}
		if !q.deferred {
			// As the stack's changes event source gathers them.
			pl.BatchSize, pl.Window = syncer.ChangesBatchSize, syncer.ChangesBatchingWindow
		}
		wg.Go(func() { pl.Run(runCtx) })
	}
	// As the stack's schedule does every syncer.SweepInterval, a sweeper
	// pushes the lanes whose job ended undelivered; a demo lasts minutes,
	// so it sweeps more often.
	sweeper, err := newWorker(st, cfg, t, o)
	if err != nil {
		return err
	}
	wg.Go(func() { sweepEvery(runCtx, sweeper, demoSweepInterval, t) })
	resyncSent := make(chan error, 1)
	start := time.Now()
	t.start = start
	sent := make(chan int, 1)
	go func() { sent <- produce(runCtx, st, o, tr) }()
	if rs != nil {
		go func() {
			at, err := startResync(runCtx, st, o.duration/4)
			rs.sent = at
			resyncSent <- err
		}()
	} else {
		close(resyncSent)
	}
	if o.stopsells > 0 {
		go stopSells(runCtx, st, o, tr)
	}
	nSent := -1
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for runCtx.Err() == nil {
		select {
		case n := <-sent:
			nSent = n
		case <-tick.C:
			progress(out, start, otas, t)
		}
		if nSent >= 0 && settled(runCtx, st) && clean(runCtx, st, cfg) {
			break
		}
	}
	if runCtx.Err() != nil && ctx.Err() == nil {
		fmt.Fprintf(out, "pipelinedemo: the run reached its limit of %v with work still pending: what did not reach the OTAs shows as stale\n", o.duration+2*time.Minute)
	}
	cancel()
	wg.Wait()
	if err := <-resyncSent; err != nil {
		return fmt.Errorf("send the resync: %w", err)
	}
	dead, err := refusedChanges(ctx, st)
	if err != nil {
		return err
	}
	return report(out, o, lim, otas, t, tr, dead, rs, time.Since(start))
}

// demoSweepInterval is the demo's stand-in for syncer.SweepInterval.
const demoSweepInterval = 30 * time.Second

// sweepEvery calls Sweep every interval until ctx ends, counting what
// became of the jobs it scheduled.
func sweepEvery(ctx context.Context, sy *syncer.Syncer, interval time.Duration, t *tally) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rep, err := sy.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "pipelinedemo: sweep: %v\n", err)
		}
		t.swept.Add(int64(rep.Lanes))
		t.add([]syncer.MessageResult{{Jobs: rep.Results}})
	}
}

func newWorker(st *stack, cfg *config.Config, t *tally, o options) (*syncer.Syncer, error) {
	db := &countingDB{Client: dynamodb.NewFromConfig(st.cfg, emulator.ForEmulator), limiterTable: st.table, t: t}
	quiet := slog.New(slog.DiscardHandler)
	p, err := pipeline.New(cfg, pipeline.Clients{DynamoDB: db, SQS: st.sqs},
		pipeline.Names{LimiterTable: st.table, StateTable: st.stateTable, DeferredURL: st.deferredURL, DeadURL: st.deadURL},
		pipeline.WithLogger(quiet), pipeline.WithLimiterOptions(limiter.WithCircuitBreaker(3, 5*time.Second)),
		pipeline.WithToken(func(env string) string { return token(o, env) }),
		pipeline.WithSyncer(func(sy *syncer.Syncer) { sy.FillQuota = o.fillQuota }),
		pipeline.WithDispatcher(func(d *dispatch.Dispatcher) {
			if t.trace != nil {
				d.Limiter = tracedLimiter{Limiter: d.Limiter.(*limiter.Limiter), t: t.trace}
				d.Pusher = tracedPusher{Pusher: d.Pusher, t: t.trace}
				d.Queue = tracedQueue{Queue: d.Queue, t: t.trace}
			}
		}))
	if err != nil {
		return nil, err
	}
	return p.Syncer, nil
}

// token is the demo's secret for a credential's env: its username is what
// the mock OTAs meter by ("token-" + env), and the XML formats take
// "user:password".
func token(o options, env string) string {
	if o.format == "wire" {
		return "token-" + env + ":demo-password"
	}
	return "token-" + env
}

// refusedChanges reads the dead-letter queue: the changes dead-lettered as
// refused by a vendor (syncer's refused-change letters), each once however
// many channels refused it, by property and sequence.
func refusedChanges(ctx context.Context, st *stack) (map[[2]string]bool, error) {
	out := map[[2]string]bool{}
	for {
		res, err := st.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &st.deadURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			return nil, fmt.Errorf("read the dead-letter queue: %w", err)
		}
		if len(res.Messages) == 0 {
			return out, nil
		}
		for _, m := range res.Messages {
			j, err := job.Decode(aws.ToString(m.Body))
			if err != nil {
				continue
			}
			var ref struct {
				Property string   `json:"property_id"`
				Refused  []string `json:"refused"`
			}
			if json.Unmarshal(j.Payload, &ref) != nil {
				continue
			}
			for _, el := range ref.Refused {
				e, err := lane.ParseElement(el)
				if err == nil {
					out[[2]string{ref.Property, fmt.Sprint(e.Sequence)}] = true
				}
			}
			_, _ = st.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &st.deadURL, ReceiptHandle: m.ReceiptHandle})
		}
	}
}

// countingDB counts a worker's DynamoDB calls, the limiter's apart from the
// ARI state's (state and lanes).
type countingDB struct {
	*dynamodb.Client
	limiterTable string
	t            *tally
}

// count counts a call and returns the func that records its latency.
func (c *countingDB) count(table *string) func() {
	if aws.ToString(table) == c.limiterTable {
		c.t.limiterCalls.Add(1)
	} else {
		c.t.stateCalls.Add(1)
	}
	start := time.Now()
	return func() { c.t.storeCall(time.Since(start)) }
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	defer c.count(in.TableName)()
	if aws.ToString(in.TableName) != c.limiterTable {
		c.t.op(opKind(aws.ToString(in.UpdateExpression), aws.ToString(in.ConditionExpression)))
	}
	return c.Client.UpdateItem(ctx, in, o...)
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	defer c.count(in.TableName)()
	return c.Client.GetItem(ctx, in, o...)
}

func (c *countingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	defer c.count(nil)()
	return c.Client.BatchGetItem(ctx, in, o...)
}

// opKind names a state write by its expressions, for the report.
func opKind(update, cond string) string {
	switch {
	case strings.HasPrefix(update, "ADD"):
		return "mark"
	case strings.HasPrefix(update, "DELETE") && strings.Contains(update, "REMOVE"):
		return "clear+release"
	case strings.HasPrefix(update, "DELETE"):
		return "clear"
	case strings.HasPrefix(update, "REMOVE"):
		return "release"
	case strings.Contains(cond, " OR ") && strings.Contains(cond, "< :now"):
		return "claim"
	case strings.Contains(update, "#s"):
		return "apply"
	}
	return "other"
}

func handler(pool chan *syncer.Syncer, deferred bool, t *tally) poller.Handler {
	return func(ctx context.Context, msgs []sqstypes.Message) ([]string, error) {
		sy := <-pool
		defer func() { pool <- sy }()
		batch := make([]syncer.Message, len(msgs))
		for i, m := range msgs {
			batch[i] = syncer.Message{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), Deferred: deferred,
				Redelivered: m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)] > "1"}
		}
		if deferred && t.trace != nil {
			for _, m := range batch {
				if j, err := job.Decode(m.Body); err == nil {
					t.trace.event("recv", j.ID, "due=%d slot=%d deferrals=%d", t.trace.since(j.Due), t.trace.since(j.Hold.At), j.Deferrals)
				}
			}
		}
		for _, m := range batch {
			if m.Redelivered {
				t.receivedAgain.Add(1)
			}
		}
		start := time.Now()
		results := sy.HandleBatch(ctx, batch)
		if t.trace != nil {
			traceBatch(t.trace, msgs, results, deferred, time.Since(start))
			for _, r := range results {
				for _, j := range r.Jobs {
					t.trace.event("outcome", j.JobID, "%s pushes=%d reason=%q", j.Outcome, j.Pushes, j.Reason)
				}
			}
		}
		t.add(results)
		var failed []string
		for _, r := range results {
			if r.Err != nil {
				failed = append(failed, r.ID)
				fmt.Fprintf(os.Stderr, "pipelinedemo: %s message %s left for redelivery: %v\n", map[bool]string{false: "changes", true: "deferred"}[deferred], r.ID, r.Err)
			}
		}
		return failed, nil
	}
}

// change is one event the producer sent, for the latency report.
type change struct {
	ari.Change
	at time.Time
}

// truth is what the PMS sent: every change, and the newest value of every
// (property, kind, room type, rate plan, date).
type truth struct {
	mu      sync.Mutex
	seq     map[string]int64 // per property
	changes []change
	newest  map[otacopy.Day]struct {
		seq    int64
		values string
	}
	// history is every change's values per day, for formats that carry no
	// sequence (a change has reached the OTA once its day holds its
	// values or a newer change's).
	history map[otacopy.Day][]held
}

type held struct {
	seq    int64
	values string
}

// produce sends the PMS events evenly over the duration, as a PMS would:
// changes of every kind, or only rates in the priority scenario.
func produce(ctx context.Context, st *stack, o options, tr *truth) int {
	gap := o.duration / time.Duration(o.events)
	kinds := []string{"availability", "rates", "restrictions"}
	if o.stopsells > 0 {
		kinds = []string{"rates"}
	}
	poisoned := map[int]bool{}
	for _, i := range rand.Perm(o.events)[:o.poison] {
		poisoned[i] = true
	}
	for i := range o.events {
		from := time.Date(2027, 1, 1+rand.IntN(60), 0, 0, 0, 0, time.UTC)
		kind := kinds[rand.IntN(len(kinds))]
		room := mappedRooms[rand.IntN(len(mappedRooms))]
		if poisoned[i] {
			room = poisonRoom
		}
		plan, values := valuesFor(kind)
		c := ari.Change{
			EventID: fmt.Sprintf("ev-%05d", i), PropertyID: fmt.Sprintf("hotel-%d", rand.IntN(properties)),
			Kind: kind, RoomType: room, RatePlan: plan,
			From: from.Format(ari.DateLayout), To: from.AddDate(0, 0, rand.IntN(7)).Format(ari.DateLayout),
			Values: values,
		}
		if err := send(ctx, st, tr, c); err != nil {
			return i
		}
		select {
		case <-ctx.Done():
			return i + 1
		case <-time.After(gap):
		}
	}
	return o.events
}

// valuesFor is a random change of kind in the formats' vocabulary
// (sdk/pipeline/format.Values), and its rate plan: availability counts
// rooms of a room type (Expedia AR has no inventory per rate plan), rates
// and restrictions belong to the rate plan.
func valuesFor(kind string) (string, map[string]any) {
	switch kind {
	case "availability":
		return "", map[string]any{"available": rand.IntN(20)}
	case "rates":
		return "BAR", map[string]any{"amount": fmt.Sprintf("%d.00", 80+rand.IntN(120)), "currency": "EUR"}
	}
	return "BAR", map[string]any{"min_los": 1 + rand.IntN(5)}
}

// stopSells sends o.stopsells stop-sells (an availability change closing
// some dates of a room) per second while the rate changes flow.
func stopSells(ctx context.Context, st *stack, o options, tr *truth) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.stopsells))
	defer tick.Stop()
	for end, i := time.Now().Add(o.duration), 0; time.Now().Before(end); i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		from := time.Date(2027, 1, 1+rand.IntN(60), 0, 0, 0, 0, time.UTC)
		c := ari.Change{
			EventID: fmt.Sprintf("stop-%05d", i), PropertyID: fmt.Sprintf("hotel-%d", rand.IntN(properties)),
			Kind: "availability", RoomType: []string{"DBL", "TWN", "STE"}[rand.IntN(3)], RatePlan: "BAR",
			From: from.Format(ari.DateLayout), To: from.AddDate(0, 0, rand.IntN(3)).Format(ari.DateLayout),
			Values: map[string]any{"closed": true},
		}
		if send(ctx, st, tr, c) != nil {
			return
		}
	}
}

// send numbers c in its property's sequence and puts it on the changes
// queue as the PMS's event.
func send(ctx context.Context, st *stack, tr *truth, c ari.Change) error {
	c.Sequence = tr.next(c.PropertyID)
	detail, _ := json.Marshal(c)
	body := fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"ARI change","source":"pms","time":%q,"detail":%s}`,
		c.EventID, time.Now().UTC().Format(time.RFC3339), detail)
	tr.record(c, time.Now())
	_, err := st.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &st.changesURL, MessageBody: &body})
	return err
}

// next is property's next sequence number.
func (tr *truth) next(property string) int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.seq == nil {
		tr.seq = map[string]int64{}
	}
	tr.seq[property]++
	return tr.seq[property]
}

func (tr *truth) record(c ari.Change, at time.Time) {
	tr.mu.Lock()
	tr.changes = append(tr.changes, change{Change: c, at: at})
	tr.mu.Unlock()
	tr.recordValues(c)
}

// recordValues records c's values as the newest of its days unless a
// newer change's are; c itself is not a change the report follows (the
// PMS's past, such as a resynced hotel's state).
func (tr *truth) recordValues(c ari.Change) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, d := range c.Dates() {
		k := otacopy.Day{HotelRef: c.PropertyID, Kind: c.Kind, RoomType: c.RoomType, RatePlan: c.RatePlan, Date: d}
		if tr.history == nil {
			tr.history = map[otacopy.Day][]held{}
		}
		tr.history[k] = append(tr.history[k], held{c.Sequence, otacopy.Values(c.Values)})
		if cur, ok := tr.newest[k]; !ok || cur.seq < c.Sequence {
			tr.newest[k] = struct {
				seq    int64
				values string
			}{c.Sequence, otacopy.Values(c.Values)}
		}
	}
}

// settled reports whether both work queues are empty, delayed and in-flight
// messages included.
func settled(ctx context.Context, st *stack) bool {
	for _, url := range []string{st.changesURL, st.deferredURL} {
		out, err := st.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
		if err != nil {
			return false
		}
		for _, v := range out.Attributes {
			if v != "0" {
				return false
			}
		}
	}
	return true
}

// clean reports whether every lane of the run is clean: nothing pending.
// A lane left dirty with the queues empty has no job on its way, and
// waits for the sweeper (demoSweepInterval).
func clean(ctx context.Context, st *stack, cfg *config.Config) bool {
	lanes := &lane.Store{DB: st.db, Table: st.stateTable}
	for prop, conns := range cfg.Properties {
		for _, kind := range config.Kinds {
			for _, t := range config.TargetsOf(cfg, conns, kind) {
				p, err := lanes.Read(ctx, lane.ID{Property: prop, Kind: kind, Channel: t.Channel, Credential: t.Credential, HotelRef: t.HotelRef})
				if err != nil || len(p.Elements) > 0 {
					return false
				}
			}
		}
	}
	return true
}

func progress(out io.Writer, start time.Time, otas map[string]*mockota.Server, t *tally) {
	pushes, throttles := 0, 0
	for _, s := range otas {
		pushes += len(s.Accepted())
		throttles += s.Count429()
	}
	t.mu.Lock()
	deferred, wasted := t.outcomes[dispatch.Deferred], t.wasted
	t.mu.Unlock()
	fmt.Fprintf(out, "  t=%5.1fs  pushes %5d  deferrals %4d  wasted slots %3d  429s %3d\n", time.Since(start).Seconds(), pushes, deferred, wasted, throttles)
}

func connectionsJSON(o options, otas map[string]*mockota.Server, lim gcra.Limit) string {
	var chs, props []string
	for _, ch := range channels {
		var eps []string
		for _, ep := range ch.endpoints {
			priority := ""
			if o.margin != "" {
				priority = fmt.Sprintf(`, "margin": %q`, o.margin)
			}
			if ch.meter != "" {
				priority += fmt.Sprintf(`, "meter": %q, "urgent_reserve": %d`, ch.meter, lim.Burst/2)
				if ep == "availability" {
					priority += `, "priority": "urgent"`
				}
			}
			eps = append(eps, fmt.Sprintf(`%q: {"path": "/v1/%s", "limit": {"rate": %g, "burst": %d}%s}`, ep, ch.meterOf(ep), lim.Rate, lim.Burst, priority))
		}
		chs = append(chs, fmt.Sprintf(`%q: {"base_url": %q, "allow_http": true, "format": %q, "endpoints": {%s}, "credentials": {"main": {"token_env": "TOKEN_%s"}}}`,
			ch.name, otas[ch.name].URL(), ch.formatOf(o), strings.Join(eps, ","), strings.ToUpper(ch.name)))
	}
	for p := range properties {
		var conns []string
		for _, ch := range channels {
			mapping := ""
			if o.resync && fmt.Sprintf("hotel-%d", p) == resyncHotel {
				mapping = mappingJSON()
			}
			conns = append(conns, fmt.Sprintf(`{"channel": %q, "credential": "main", "hotel_ref": %q%s}`, ch.name, hotelRef(ch.name, fmt.Sprintf("hotel-%d", p)), mapping))
		}
		props = append(props, fmt.Sprintf(`"hotel-%d": [%s]`, p, strings.Join(conns, ", ")))
	}
	return fmt.Sprintf(`{"channels": {%s}, "properties": {%s}}`, strings.Join(chs, ","), strings.Join(props, ","))
}
