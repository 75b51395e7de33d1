package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/truora/minidyn/aws-v2/client"
)

// maxItemBytes is DynamoDB's item size limit, which minidyn does not enforce.
const maxItemBytes = 400 * 1024

// Latency is a log-normal distribution given by its median and 99th
// percentile: the shape of a store's or a network's answer times, a long
// right tail and nothing below zero.
type Latency struct {
	P50, P99 time.Duration
}

// draw is one latency from l with r.
func (l Latency) draw(r *rand.Rand) time.Duration {
	if l.P50 <= 0 {
		return 0
	}
	sigma := 0.0
	if l.P99 > l.P50 {
		sigma = math.Log(float64(l.P99)/float64(l.P50)) / 2.3263 // z of the 99th percentile
	}
	d := float64(l.P50) * math.Exp(sigma*r.NormFloat64())
	return time.Duration(min(d, float64(20*l.P99)))
}

// DB is DynamoDB for the simulation: minidyn evaluates the expressions and
// holds the items; DB adds what minidyn lacks and the run must measure. It
// serializes every call (an item read before and after each write, the
// bill, the size check and the write happen as one step), bills read and
// write units from item sizes as DynamoDB does, refuses items over 400 KB,
// counts each item's writes per simulated second, sleeps a drawn latency in
// the bubble, and fails every call during an outage.
//
// One lock for every shard costs no parallelism: latencies are drawn from
// a continuous distribution, so two calls almost never wake at the same
// simulated instant, and the bubble runs one goroutine at a time between
// instants (a 400-property storm's profile: the lock held 45% of the wall
// time, and the program kept 1.09 cores busy, 0.11 of it the collector).
//
// What minidyn lacks, and what DB does about it:
//   - it applies a SET clause's actions left to right, where DynamoDB
//     evaluates every action on the item before the update: DB orders the
//     actions so that each one that reads an attribute runs before the one
//     that sets it (setorder.go).
//   - begins_with on a missing attribute is a ValidationException ("invalid
//     type NULL") where DynamoDB evaluates false, and OR does not
//     short-circuit, so the limiter's fresh-item condition fails: DB
//     rewrites begins_with(a, :v) as attribute_exists(a) when the item has
//     no a, which is false exactly where DynamoDB's begins_with is.
//   - no UpdateTimeToLive/DescribeTimeToLive: DB answers them and remembers
//     the attribute (items never expire in a simulated hour; nothing in the
//     pipeline relies on expiry for correctness).
//   - no 400 KB item limit, no consumed capacity: DB computes item sizes.
//   - no limits on a request (4 KB an expression, 100 actions a
//     transaction, 100 keys a BatchGetItem): DB refuses what DynamoDB
//     refuses, with a ValidationException (limits.go).
type DB struct {
	mu      sync.Mutex
	c       *client.Client
	shards  []*client.Client // the ARI items (shards.go)
	rng     *rand.Rand
	latency Latency
	// serve, if > 0, is how long the one server works on a call; busy is
	// when it is free again (Scenario.DBServe).
	serve time.Duration
	busy  time.Time
	ttl   map[string]string
	// down reports whether the store is out at a time; downTable, if
	// set, limits the outage to that table.
	down      func(time.Time) bool
	downTable string
	// slow reports whether a share slowShare of the store's answers take
	// slowLatency (at most slowCap) at a time (Faults.SlowStore).
	slow        func(time.Time) bool
	slowShare   float64
	slowLatency Latency
	slowCap     time.Duration
	// keys are each table's key attribute names.
	keys map[string][]string
	// indexes are each table's global secondary indexes by name (index.go).
	indexes map[string]map[string]gsi
	// laneTables are the tables that hold lane items (shards.go).
	laneTables map[string]bool
	stats      DBStats
	hot        map[string]*itemHeat
	// sizes are every stored item's size by sizeKey, kept on each write,
	// so that billing a read or a write needs no copy of the item; parts
	// are the keys of each partition's items (partition.go).
	sizes map[string]int
	parts map[string]map[string]map[string]types.AttributeValue
	// items are stored items by sizeKey as DB last wrote or read them
	// (items.go): a read copies one instead of having minidyn convert it.
	items map[string]map[string]types.AttributeValue
	// unput are items seeded and kept but not yet put into minidyn, by
	// sizeKey (seed.go).
	unput map[string]map[string]types.AttributeValue
	// checkItems has every read of a kept item check it against minidyn.
	checkItems bool
	// laneTrace, if set, records every write of a lanes item (lanetrace.go).
	laneTrace *laneTrace
	// lose is the chance a write that landed answers with an error all
	// the same (Faults.LostAnswers), drawn with loseRNG.
	lose    float64
	loseRNG *rand.Rand
	// answerAll answers every write (aside); the draw of a loss is made all
	// the same, so that the run's losses fall as they would without it.
	answerAll bool
	// Lost counts the answers lost.
	Lost int
	// LaneWentBack counts writes that replaced a lane's pending set with
	// one naming an older change for a date it still holds (lanecheck.go).
	LaneWentBack      int
	FirstLaneWentBack string
}

// DBStats are the store's counters for the report.
type DBStats struct {
	Calls        map[string]int // by "table op"
	WCU, RCU     float64
	WCUByOp      map[string]float64 // by "table op"
	op           string             // the call being billed, under DB.mu
	Failed       int                // calls answered with an outage error
	Conditional  int                // conditional check failures
	Unexpected   int                // other errors minidyn returned
	FirstErrors  []string
	TooLarge     int
	LimiterCalls int
	// Sites are the calls by where the SDK made them (callSite).
	Sites map[string]*Site
	site  *Site  // the call being billed, under DB.mu
	where string // its call site, under DB.mu
}

// Site is one call site's calls and what they were billed.
type Site struct {
	Calls, Conditional int
	WCU, RCU           float64
}

// itemHeat is one item's writes in the current simulated second and the
// most it had in any second.
type itemHeat struct {
	sec               int64
	writes, wcu       int
	maxWrites, maxWCU int
	total             int
}

// NewDB is an empty store drawing latencies from lat with r.
func NewDB(r *rand.Rand, lat Latency) *DB {
	return &DB{c: client.NewClient(), shards: newShards(), rng: r, latency: lat, ttl: map[string]string{}, keys: map[string][]string{}, indexes: map[string]map[string]gsi{}, laneTables: map[string]bool{},
		stats: DBStats{Calls: map[string]int{}, WCUByOp: map[string]float64{}, Sites: map[string]*Site{}}, hot: map[string]*itemHeat{}, sizes: map[string]int{}, parts: map[string]map[string]map[string]types.AttributeValue{},
		items: map[string]map[string]types.AttributeValue{}, unput: map[string]map[string]types.AttributeValue{}}
}

// SetOutage makes every call fail while down(now) holds.
func (d *DB) SetOutage(down func(time.Time) bool) { d.SetTableOutage("", down) }

// SetTableOutage makes every call on table fail while down(now) holds
// (every table's calls if table is "").
func (d *DB) SetTableOutage(table string, down func(time.Time) bool) {
	d.mu.Lock()
	d.down, d.downTable = down, table
	d.mu.Unlock()
}

// Stats is a copy of the counters.
func (d *DB) Stats() DBStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Calls = map[string]int{}
	for k, v := range d.stats.Calls {
		s.Calls[k] = v
	}
	s.WCUByOp = map[string]float64{}
	for k, v := range d.stats.WCUByOp {
		s.WCUByOp[k] = v
	}
	s.Sites = map[string]*Site{}
	for k, v := range d.stats.Sites {
		cp := *v
		s.Sites[k] = &cp
	}
	return s
}

// Hottest is the item with the most writes in one simulated second, its
// writes and write units in that second, and its total writes.
func (d *DB) Hottest() (key string, writes, wcu, total int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, h := range d.hot {
		if h.maxWrites > writes || (h.maxWrites == writes && k < key) {
			key, writes, wcu, total = k, h.maxWrites, h.maxWCU, h.total
		}
	}
	return key, writes, wcu, total
}

// call wraps one request: the latency half before and half after the
// step (the step happens at one instant, somewhere in the round trip), the
// outage and the counters. It holds no lock while sleeping.
func (d *DB) call(ctx context.Context, table, op string, step func() error) error {
	where := table + " " + op + " " + callSite()
	d.mu.Lock()
	l, slow := d.latency, d.slow != nil && d.slow(time.Now()) && d.rng.Float64() < d.slowShare
	if slow {
		l = d.slowLatency
	}
	lat := l.draw(d.rng)
	if slow {
		lat = min(lat, d.slowCap)
	}
	d.mu.Unlock()
	if err := sleep(ctx, lat/2); err != nil {
		return err
	}
	if d.serve > 0 {
		d.mu.Lock()
		if now := time.Now(); d.busy.Before(now) {
			d.busy = now
		}
		d.busy = d.busy.Add(d.serve)
		done := d.busy
		d.mu.Unlock()
		if err := sleep(ctx, time.Until(done)); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.stats.Calls[table+" "+op]++
	d.stats.op = table + " " + op
	d.stats.site = d.stats.Sites[where]
	if d.stats.site == nil {
		d.stats.site = &Site{}
		d.stats.Sites[where] = d.stats.site
	}
	d.stats.site.Calls++
	d.stats.where = where
	var err error
	if d.down != nil && (d.downTable == "" || d.downTable == table) && d.down(time.Now()) {
		d.stats.Failed++
		err = &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op,
			Err: &types.InternalServerError{Message: aws.String("simulated outage")}}
	} else {
		err = step()
		d.classify(err)
		if err == nil && d.lose > 0 && op != "GetItem" && op != "BatchGetItem" && op != "Query" && d.loseRNG.Float64() < d.lose && !d.answerAll {
			d.Lost++
			err = &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op,
				Err: &types.InternalServerError{Message: aws.String("simulated lost answer: the write landed")}}
		}
	}
	d.mu.Unlock()
	if serr := sleep(ctx, lat-lat/2); serr != nil && err == nil {
		// The write happened; the caller hears a cancelled call, as a
		// client whose context ended mid-request does.
		return serr
	}
	return err
}

func (d *DB) classify(err error) {
	if err == nil {
		return
	}
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	if errors.As(err, &ccf) || errors.As(err, &tce) {
		d.stats.Conditional++
		d.stats.site.Conditional++
		return
	}
	d.stats.Unexpected++
	if len(d.stats.FirstErrors) < 5 {
		d.stats.FirstErrors = append(d.stats.FirstErrors, err.Error())
	}
}

func sleep(ctx context.Context, dur time.Duration) error {
	if dur <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CreateTable creates a table and remembers its key attributes.
func (d *DB) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range in.KeySchema {
		d.keys[aws.ToString(in.TableName)] = append(d.keys[aws.ToString(in.TableName)], aws.ToString(k.AttributeName))
	}
	d.rememberIndexes(in)
	return d.createTable(ctx, in)
}

// DescribeTable answers an active table.
func (d *DB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out, err := d.c.DescribeTable(ctx, in)
	if err == nil && out.Table != nil {
		out.Table.TableStatus = types.TableStatusActive
	}
	return out, err
}

// UpdateTimeToLive remembers the TTL attribute (minidyn has no TTL).
func (d *DB) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ttl[aws.ToString(in.TableName)] = aws.ToString(in.TimeToLiveSpecification.AttributeName)
	return &dynamodb.UpdateTimeToLiveOutput{TimeToLiveSpecification: in.TimeToLiveSpecification}, nil
}

// DescribeTimeToLive answers what UpdateTimeToLive set.
func (d *DB) DescribeTimeToLive(_ context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	desc := &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
	if a, ok := d.ttl[aws.ToString(in.TableName)]; ok {
		desc = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusEnabled, AttributeName: aws.String(a)}
	}
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: desc}, nil
}

// UpdateItem is billed on the larger of the item before and after, 1 WCU
// per KB rounded up; a failed condition is billed on the item as it is.
// The item before is read only where the call needs it (a begins_with to
// rewrite, a set clause to correct, old values to return, or a write that
// could grow it past 400 KB); its size alone comes from d.sizes.
func (d *DB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	var out *dynamodb.UpdateItemOutput
	table := aws.ToString(in.TableName)
	err := d.call(ctx, table, "UpdateItem", func() error {
		if err := checkLimits(in); err != nil {
			return err
		}
		sk := sizeKey(table, in.Key)
		beforeSize := d.sizes[sk]
		var before map[string]types.AttributeValue
		peeked := d.needsBefore(in, beforeSize)
		if peeked {
			before = d.peek(table, in.Key)
			if n := itemSize(before); n != beforeSize {
				panic(fmt.Sprintf("sim: %s is %d bytes, its size was kept as %d: a write bypassed DB.sizes", sk, n, beforeSize))
			}
		}
		var replaced []string
		var sets [][]string
		if table == "state" {
			if replaced = laneSetsReplaced(in); len(replaced) > 0 {
				was := before
				if !peeked {
					was = d.peek(table, in.Key)
				}
				for _, a := range replaced {
					sets = append(sets, stringSet(was, a))
				}
			}
		}
		cp := *in
		cp.UpdateExpression = aws.String(orderSets(aws.ToString(in.UpdateExpression)))
		cp.ConditionExpression = d.fixBeginsWith(in.ConditionExpression, in.ExpressionAttributeNames, before)
		cp.ExpressionAttributeValues = copyItem(used(in.ExpressionAttributeValues, cp.ConditionExpression, cp.UpdateExpression))
		// minidyn renders the new item as its GetItem would, for one
		// conversion less than reading it again.
		renderNew := in.ReturnValues == "" || in.ReturnValues == types.ReturnValueNone || in.ReturnValues == types.ReturnValueAllNew
		if renderNew {
			cp.ReturnValues = types.ReturnValueAllNew
		}
		var err error
		out, err = d.shardOf(table, in.Key).UpdateItem(ctx, &cp)
		if err == nil {
			d.forget(sk)
		}
		if err != nil {
			d.bill(table, in.Key, writeUnits(beforeSize), false)
			var ccf *types.ConditionalCheckFailedException
			if errors.As(err, &ccf) && in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
				// A failed write left the item as it was.
				ccf.Item = copyItem(d.peek(table, in.Key))
			}
			if d.laneTrace != nil && table == "state" {
				d.laneTrace.laneWrite(in.Key, d.stats.where, "cond", d.peek(table, in.Key))
			}
			return err
		}
		after := out.Attributes
		if !renderNew {
			after = d.peek(table, in.Key)
		}
		if fixed, changed := fixSets(before, after, &cp); changed {
			_, _ = d.shardOf(table, in.Key).PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: fixed})
			after = fixed
		}
		// The item as stored, not minidyn's rendering of it.
		switch in.ReturnValues {
		case types.ReturnValueAllNew:
			// after is minidyn's own rendering or fixSets' item: nothing
			// else holds it, so the caller may have it uncopied.
			out.Attributes = after
		case types.ReturnValueAllOld:
			out.Attributes = copyItem(before)
		case "", types.ReturnValueNone:
			out.Attributes = nil
		}
		afterSize := itemSize(after)
		if afterSize > maxItemBytes {
			if !peeked {
				panic(fmt.Sprintf("sim: %s grew from %d to %d bytes, past needsBefore's bound", sk, beforeSize, afterSize))
			}
			d.restore(ctx, table, in.Key, before)
			d.stats.TooLarge++
			out = nil
			return &smithy.GenericAPIError{Code: "ValidationException",
				Message: fmt.Sprintf("Item size to update has exceeded the maximum allowed size (%d bytes)", afterSize)}
		}
		d.setSize(table, in.Key, afterSize)
		d.keep(sk, after)
		for i, a := range replaced {
			if why := laneWentBack(sets[i], stringSet(after, a)); why != "" {
				d.LaneWentBack++
				if d.FirstLaneWentBack == "" {
					d.FirstLaneWentBack = fmt.Sprintf("%s %s %s", sk, a, why)
				}
			}
		}
		if d.laneTrace != nil && table == "state" {
			d.laneTrace.laneWrite(in.Key, d.stats.where, "ok", after)
		}
		d.bill(table, in.Key, writeUnits(max(beforeSize, afterSize)), true)
		return nil
	})
	return out, err
}

// GetItem: a consistent read is 1 RCU per 4 KB rounded up, an eventual one half.
func (d *DB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	var out *dynamodb.GetItemOutput
	table := aws.ToString(in.TableName)
	err := d.call(ctx, table, "GetItem", func() error {
		if err := checkLimits(in); err != nil {
			return err
		}
		var err error
		out, err = d.getItem(ctx, table, in)
		if err == nil {
			d.addRCU(readUnits(d.sizes[sizeKey(table, in.Key)], aws.ToBool(in.ConsistentRead)))
		}
		return err
	})
	return out, err
}

// BatchGetItem bills each item as a GetItem.
func (d *DB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	var out *dynamodb.BatchGetItemOutput
	table := ""
	for t := range in.RequestItems {
		table = t
	}
	err := d.call(ctx, table, "BatchGetItem", func() error {
		if err := checkLimits(in); err != nil {
			return err
		}
		var err error
		out, err = d.batchGet(ctx, in)
		if err != nil {
			return err
		}
		for t, ka := range in.RequestItems {
			for _, k := range ka.Keys {
				d.addRCU(readUnits(d.sizes[sizeKey(t, k)], aws.ToBool(ka.ConsistentRead)))
			}
		}
		return nil
	})
	return out, err
}

// Query bills the items it returns, summed and then rounded up to 4 KB. A
// Query on an index is DB's own (index.go), and so is one for a whole
// partition (partition.go).
func (d *DB) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	var out *dynamodb.QueryOutput
	table := aws.ToString(in.TableName)
	err := d.call(ctx, table, "Query", func() error {
		if err := checkLimits(in); err != nil {
			return err
		}
		var err error
		var whole bool
		if in.IndexName != nil {
			out, err = d.queryIndex(ctx, in)
		} else if out, whole = d.queryPartition(ctx, in); !whole {
			out, err = d.queryShard(table, in).Query(ctx, in)
		}
		if err != nil {
			return err
		}
		total := 0
		for _, it := range out.Items {
			total += itemSize(it)
		}
		d.addRCU(readUnits(total, aws.ToBool(in.ConsistentRead)))
		return nil
	})
	return out, err
}

// TransactWriteItems bills twice the write units of every item.
func (d *DB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	var out *dynamodb.TransactWriteItemsOutput
	table := ""
	for _, it := range in.TransactItems {
		if it.Update != nil {
			table = aws.ToString(it.Update.TableName)
		}
	}
	err := d.call(ctx, table, "TransactWriteItems", func() error {
		if err := checkLimits(in); err != nil {
			return err
		}
		cp := *in
		cp.TransactItems = append([]types.TransactWriteItem(nil), in.TransactItems...)
		befores := make([]map[string]types.AttributeValue, len(cp.TransactItems))
		for i, it := range cp.TransactItems {
			if it.Update == nil {
				continue
			}
			u := *it.Update
			u.UpdateExpression = aws.String(orderSets(aws.ToString(u.UpdateExpression)))
			befores[i] = d.peek(aws.ToString(u.TableName), u.Key)
			u.ConditionExpression = d.fixBeginsWith(u.ConditionExpression, u.ExpressionAttributeNames, befores[i])
			u.ExpressionAttributeValues = used(u.ExpressionAttributeValues, u.ConditionExpression, u.UpdateExpression)
			cp.TransactItems[i].Update = &u
		}
		var err error
		out, err = d.c.TransactWriteItems(ctx, &cp)
		for i, it := range cp.TransactItems {
			if it.Update == nil {
				continue
			}
			t := aws.ToString(it.Update.TableName)
			size := itemSize(befores[i])
			if err == nil {
				d.forget(sizeKey(t, it.Update.Key))
				after := itemSize(d.peek(t, it.Update.Key))
				d.setSize(t, it.Update.Key, after)
				size = max(size, after)
			}
			d.bill(t, it.Update.Key, 2*writeUnits(size), err == nil)
		}
		return err
	})
	return out, err
}

// peek reads an item without billing or latency, under d.mu. The item is
// DB's own (items.go): its callers read it, copy it or put it back whole.
func (d *DB) peek(table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	return d.stored(table, key)
}

// restore puts an item back as it was before a write that made it too large.
func (d *DB) restore(ctx context.Context, table string, key, before map[string]types.AttributeValue) {
	d.forget(sizeKey(table, key))
	if before == nil {
		d.dropSize(table, key)
		_, _ = d.shardOf(table, key).DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key})
		return
	}
	d.setSize(table, key, itemSize(before))
	_, _ = d.shardOf(table, key).PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: before})
}

// bill adds write units and, for a write that happened, the item's heat.
func (d *DB) bill(table string, key map[string]types.AttributeValue, wcu int, wrote bool) {
	d.stats.WCU += float64(wcu)
	d.stats.WCUByOp[d.stats.op] += float64(wcu)
	d.stats.site.WCU += float64(wcu)
	if !wrote {
		return
	}
	k := sizeKey(table, key)
	h := d.hot[k]
	if h == nil {
		h = &itemHeat{}
		d.hot[k] = h
	}
	sec := time.Now().Unix()
	if h.sec != sec {
		h.sec, h.writes, h.wcu = sec, 0, 0
	}
	h.writes++
	h.wcu += wcu
	h.total++
	h.maxWrites, h.maxWCU = max(h.maxWrites, h.writes), max(h.maxWCU, h.wcu)
}

// sizeKey names an item in d.sizes and d.hot.
func sizeKey(table string, key map[string]types.AttributeValue) string {
	return table + "/" + keyString(key)
}

// needsBefore says whether UpdateItem must read the item before the write:
// to rewrite a begins_with, correct a set clause, return old values, or
// put it back should the write grow it past 400 KB. The last is bounded
// from above: every action's value is built from operands (the update
// expression's tokens), each no larger than the item, an expression
// value or a number, so the item after is at most before + tokens ×
// (before + values + names + a number).
func (d *DB) needsBefore(in *dynamodb.UpdateItemInput, beforeSize int) bool {
	update := aws.ToString(in.UpdateExpression)
	if strings.Contains(aws.ToString(in.ConditionExpression), "begins_with(") ||
		len(setClauses(update)) > 0 || in.ReturnValues == types.ReturnValueAllOld {
		return true
	}
	operand := beforeSize + 64
	for k, v := range in.ExpressionAttributeValues {
		operand += len(k) + valueSize(v)
	}
	for k, v := range in.ExpressionAttributeNames {
		operand += len(k) + len(v)
	}
	tokens := words(update) + 1
	return beforeSize+len(update)+tokens*operand > maxItemBytes
}

// words counts the runs of ASCII word bytes in s, as
// len(strings.FieldsFunc(s, not a word byte)) would, without the slice.
func words(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		w := isWordByte(s[i])
		if w && !in {
			n++
		}
		in = w
	}
	return n
}

func keyString(key map[string]types.AttributeValue) string {
	names := make([]string, 0, len(key))
	for n := range key {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		if s, ok := key[n].(*types.AttributeValueMemberS); ok {
			b.WriteString(s.Value + "|")
		} else {
			fmt.Fprintf(&b, "%v|", key[n])
		}
	}
	return b.String()
}

var beginsWith = regexp.MustCompile(`begins_with\(\s*([#\w.]+)\s*,\s*(:\w+)\s*\)`)

// fixBeginsWith rewrites begins_with(a, :v) as attribute_exists(a) where
// the item has no a: both are false there, and minidyn errs on the first.
func (d *DB) fixBeginsWith(cond *string, names map[string]string, item map[string]types.AttributeValue) *string {
	c := aws.ToString(cond)
	if !strings.Contains(c, "begins_with(") {
		return cond
	}
	fixed := beginsWith.ReplaceAllStringFunc(c, func(m string) string {
		attr := beginsWith.FindStringSubmatch(m)[1]
		name := attr
		if n, ok := names[attr]; ok {
			name = n
		}
		if _, ok := item[name]; ok {
			return m
		}
		return "attribute_exists(" + attr + ")"
	})
	return &fixed
}

// used drops the values no expression names any more (after fixBeginsWith):
// minidyn, like DynamoDB, refuses unused ones.
func used(values map[string]types.AttributeValue, exprs ...*string) map[string]types.AttributeValue {
	text := ""
	for _, e := range exprs {
		text += aws.ToString(e) + " "
	}
	var out map[string]types.AttributeValue
	for k := range values {
		if !mentions(text, k) {
			if out == nil {
				out = make(map[string]types.AttributeValue, len(values))
				for k2, v := range values {
					out[k2] = v
				}
			}
			delete(out, k)
		}
	}
	if out == nil {
		return values
	}
	return out
}

// mentions reports whether text holds name followed by a word boundary
// (what the regular expression name\b matches), without compiling one per
// value and call.
func mentions(text, name string) bool {
	if name == "" {
		return false
	}
	endsWord := isWordByte(name[len(name)-1])
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		end := i + j + len(name)
		if (end < len(text) && isWordByte(text[end])) != endsWord {
			return true
		}
		i += j + 1
	}
}

func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func writeUnits(size int) int { return max(1, (size+1023)/1024) }

func readUnits(size int, consistent bool) float64 {
	u := float64(max(1, (size+4095)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// itemSize is an item's size as DynamoDB counts it: attribute names plus
// values (strings and binaries by length, numbers by one byte per two
// significant digits plus one, lists and maps 3 bytes plus 1 per element),
// as DynamoDB's item size rules state.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 1
}

// numberSize follows DynamoDB's rule: 1 byte per two significant digits,
// leading and trailing zeros trimmed, plus 1.
func numberSize(s string) int {
	var digits []byte
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' || s[i] == 'E' {
			break // the exponent only places the digits
		}
		if s[i] >= '0' && s[i] <= '9' {
			digits = append(digits, s[i])
		}
	}
	sig := strings.Trim(string(digits), "0")
	return (len(sig)+1)/2 + 1
}
