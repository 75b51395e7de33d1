package benchkit

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
)

// Meter counts what a DynamoDB client sends and what DynamoDB would bill
// for it. Install it on any number of clients with Option; a client that
// takes a concrete *dynamodb.Client (as third-party limiters do) is metered
// the same way as one behind an interface.
//
// Requests are counted per attempt, retries included, the way the server
// sees them. Capacity is computed by DynamoDB's rules, because emulators do
// not report it faithfully (moto 5 returns a flat 0.5 for every UpdateItem,
// where DynamoDB bills a write unit, 0.5 for a GetItem even when it is
// strongly consistent, 1.0 for a PutItem, and nothing at all for a write
// whose condition failed, which DynamoDB bills as a write):
//
//   - a write (PutItem, UpdateItem, DeleteItem) costs ceil(item size / 1 KB)
//     write units, at least 1, and a write whose condition failed is billed
//     the same as one that succeeded;
//   - a strongly consistent read costs ceil(item size / 4 KB) read units, at
//     least 1, even when there is no item; an eventually consistent read
//     half that.
//
// The item size is taken from what the call carried or returned (the Item
// of a PutItem, the attributes an UpdateItem returned, the item a failed
// condition handed back); Usage.MaxItemBytes shows the largest seen.
// Whatever the emulator reported is kept apart, in Usage.Reported.
type Meter struct {
	mu sync.Mutex
	u  Usage
}

// Usage is what a Meter counted.
type Usage struct {
	// Requests is every request sent to DynamoDB, retries included.
	Requests int64
	// ByOperation splits Requests by operation name ("UpdateItem", …).
	ByOperation map[string]int64
	// Writes counts write calls the table decided (succeeded or failed its
	// condition); ConditionFailed the part that failed it.
	Writes, ConditionFailed int64
	// ConsistentReads and EventualReads count GetItem calls that returned.
	ConsistentReads, EventualReads int64
	// Errors counts calls that failed otherwise (nothing billed).
	Errors int64
	// WCU and RCU are the write and read capacity units DynamoDB bills for
	// these calls (on demand: write and read request units).
	WCU, RCU float64
	// Reported is the sum of the ConsumedCapacity the server returned, and
	// ReportedCalls how many calls carried one.
	Reported      float64
	ReportedCalls int64
	// MaxItemBytes is the largest item size seen, by DynamoDB's rules.
	MaxItemBytes int
}

// Option installs the meter on a client:
//
//	dynamodb.NewFromConfig(cfg, meter.Option())
func (m *Meter) Option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			if err := st.Initialize.Add(middleware.InitializeMiddlewareFunc("benchkitMeter", m.call), middleware.Before); err != nil {
				return err
			}
			// After the retry middleware, so each attempt passes here.
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("benchkitMeterAttempt", m.attempt), middleware.After)
		})
	}
}

// ForEmulator fits a worker's client to the single-threaded emulator and to
// runs that end by cancelling the calls in flight:
//
//   - no keep-alive. When a call is cancelled while its connection is being
//     dialled, Go's transport still parks the new connection in its idle
//     pool; the single-threaded moto server accepts it and then waits for a
//     request on it, serving nobody else, until the pool drops it after 90 s
//     (seen here: a fresh request stalled 80+ s after 16 cancelled ones).
//     Without keep-alive the transport closes such a connection at once;
//     moto closes every connection after one request anyway.
//   - no warnings: the SDK warns about every response body a cancelled
//     call could not finish reading.
func ForEmulator(o *dynamodb.Options) {
	o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) { t.DisableKeepAlives = true })
	o.Logger = logging.Nop{}
}

// Usage returns a copy of the counts so far.
func (m *Meter) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.u
	u.ByOperation = make(map[string]int64, len(m.u.ByOperation))
	for k, v := range m.u.ByOperation {
		u.ByOperation[k] = v
	}
	return u
}

func (m *Meter) attempt(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	op := awsmiddleware.GetOperationName(ctx)
	m.mu.Lock()
	m.u.Requests++
	if m.u.ByOperation == nil {
		m.u.ByOperation = map[string]int64{}
	}
	m.u.ByOperation[op]++
	m.mu.Unlock()
	return next.HandleFinalize(ctx, in)
}

// call asks for the consumed capacity and bills the call once it returns.
func (m *Meter) call(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	kind, consistent, sent := classify(in.Parameters)
	out, md, err := next.HandleInitialize(ctx, in)

	size, cc := sent, (*types.ConsumedCapacity)(nil)
	switch r := out.Result.(type) {
	case *dynamodb.GetItemOutput:
		size, cc = max(size, ItemBytes(r.Item)), r.ConsumedCapacity
	case *dynamodb.PutItemOutput:
		size, cc = max(size, ItemBytes(r.Attributes)), r.ConsumedCapacity
	case *dynamodb.UpdateItemOutput:
		size, cc = max(size, ItemBytes(r.Attributes)), r.ConsumedCapacity
	case *dynamodb.DeleteItemOutput:
		size, cc = max(size, ItemBytes(r.Attributes)), r.ConsumedCapacity
	}
	var ccf *types.ConditionalCheckFailedException
	failedCondition := errors.As(err, &ccf)
	if failedCondition {
		size = max(size, ItemBytes(ccf.Item))
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.u.MaxItemBytes = max(m.u.MaxItemBytes, size)
	if cc != nil && cc.CapacityUnits != nil {
		m.u.Reported += *cc.CapacityUnits
		m.u.ReportedCalls++
	}
	switch {
	case err != nil && !failedCondition:
		m.u.Errors++
	case kind == opWrite:
		m.u.Writes++
		if failedCondition {
			m.u.ConditionFailed++
		}
		m.u.WCU += units(size, 1024)
	case kind == opRead && consistent:
		m.u.ConsistentReads++
		m.u.RCU += units(size, 4096)
	case kind == opRead:
		m.u.EventualReads++
		m.u.RCU += units(size, 4096) / 2
	}
	return out, md, err
}

type opKind int

const (
	opOther opKind = iota
	opRead
	opWrite
)

// classify sets ReturnConsumedCapacity=TOTAL on the calls that bill
// capacity and returns their kind and the size of an item they carry.
func classify(params any) (kind opKind, consistent bool, size int) {
	switch p := params.(type) {
	case *dynamodb.GetItemInput:
		p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		return opRead, aws.ToBool(p.ConsistentRead), 0
	case *dynamodb.PutItemInput:
		p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		return opWrite, false, ItemBytes(p.Item)
	case *dynamodb.UpdateItemInput:
		p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		return opWrite, false, ItemBytes(p.Key)
	case *dynamodb.DeleteItemInput:
		p.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
		return opWrite, false, ItemBytes(p.Key)
	}
	return opOther, false, 0
}

// units is ceil(size/per), at least 1.
func units(size, per int) float64 { return max(1, math.Ceil(float64(size)/float64(per))) }

// ItemBytes is an item's size as DynamoDB bills it (the developer
// guide's "Item sizes and formats"): each attribute's name plus its value.
// Strings and binaries count their bytes, a number one byte per two
// significant digits plus one (the exponent only places the digits),
// booleans and nulls one byte, a set the sum of its members, and a list or
// map three bytes plus one byte per element besides the element itself (a
// map element is its name and its value).
func ItemBytes(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueBytes(v)
	}
	return n
}

func valueBytes(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberBytes(v.Value)
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
			n += numberBytes(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueBytes(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueBytes(e)
		}
		return n
	}
	return 0
}

// numberBytes is (significant digits + 1)/2 + 1: leading and trailing
// zeros, the sign, the point and the exponent carry no digit DynamoDB
// stores.
func numberBytes(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.Trim(strings.NewReplacer("-", "", ".", "", "+", "").Replace(s), "0")
	return (len(digits)+1)/2 + 1
}
