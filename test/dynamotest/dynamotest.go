// Package dynamotest wraps a real DynamoDB client to count its calls or to
// inject faults, for tests and benchmarks against the emulator. It never
// imitates DynamoDB: every call that is not failed on purpose reaches the
// real client.
package dynamotest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Counter counts the calls that pass through it to DB.
type Counter struct {
	DB       limiter.DynamoDBAPI
	updates  atomic.Int64
	gets     atomic.Int64
	unheard  atomic.Int64          // updates that ended without an answer from the store
	lastMiss atomic.Pointer[error] // the error of the latest of them
}

// UpdateItem counts and forwards.
func (c *Counter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.updates.Add(1)
	out, err := c.DB.UpdateItem(ctx, in, opts...)
	c.hear(err)
	return out, err
}

// hear counts an update the store never answered: an error that is not
// the service's (a reset connection, a timeout). The limiter retries those,
// so on a loaded machine they add writes no algorithm asked for.
func (c *Counter) hear(err error) {
	var api smithy.APIError
	if err != nil && !errors.As(err, &api) {
		c.unheard.Add(1)
		c.lastMiss.Store(&err)
	}
}

// GetItem counts and forwards.
func (c *Counter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.DB.GetItem(ctx, in, opts...)
}

// TransactWriteItems counts as an update and forwards, if DB can.
func (c *Counter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.updates.Add(1)
	tx, ok := c.DB.(limiter.TransactAPI)
	if !ok {
		return nil, limiter.ErrNoTransactions
	}
	out, err := tx.TransactWriteItems(ctx, in, opts...)
	c.hear(err)
	return out, err
}

// Calls is the number of calls of any kind so far.
func (c *Counter) Calls() int64 { return c.updates.Load() + c.gets.Load() }

// Updates is the number of UpdateItem calls so far.
func (c *Counter) Updates() int64 { return c.updates.Load() }

// Answered is the number of updates the store answered, with a result or
// with its own error (a failed condition): Updates less those lost to the
// transport. A count of the writes an algorithm spends uses it, so that a
// reset connection on a busy emulator does not read as an extra write.
func (c *Counter) Answered() int64 { return c.updates.Load() - c.unheard.Load() }

// LastUnanswered is the error of the latest update the store did not
// answer, or nil; for a test's message.
func (c *Counter) LastUnanswered() error {
	if p := c.lastMiss.Load(); p != nil {
		return *p
	}
	return nil
}

// Fault decides, per call, what error (if any) to return instead of or after
// the real call.
type Fault struct {
	// Before, when it returns non-nil, fails the call without sending it.
	Before func(op string) error
	// After runs once the real call returned; a non-nil result replaces the
	// call's outcome, as a response lost on the way back would.
	After func(op string, err error) error
	// Hang, when it returns true, holds the call without sending it until
	// its context ends, as a store that stopped answering would.
	Hang func(op string) bool
}

// before applies Hang and Before.
func (p Fault) before(ctx context.Context, op string) error {
	if p.Hang != nil && p.Hang(op) {
		<-ctx.Done()
		return ctx.Err()
	}
	if p.Before != nil {
		return p.Before(op)
	}
	return nil
}

// Faulty forwards calls to DB, failing them as Fault says.
type Faulty struct {
	DB    limiter.DynamoDBAPI
	mu    sync.Mutex
	F     Fault
	calls atomic.Int64
}

// Calls is how many calls reached the wrapper, failed or not.
func (f *Faulty) Calls() int64 { return f.calls.Load() }

// Set replaces the fault plan.
func (f *Faulty) Set(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.F = fault
}

func (f *Faulty) plan() Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.F
}

// UpdateItem forwards, or fails as planned.
func (f *Faulty) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.calls.Add(1)
	p := f.plan()
	if err := p.before(ctx, "UpdateItem"); err != nil {
		return nil, err
	}
	out, err := f.DB.UpdateItem(ctx, in, opts...)
	if p.After != nil {
		if ferr := p.After("UpdateItem", err); ferr != nil {
			return nil, ferr
		}
	}
	return out, err
}

// GetItem forwards, or fails as planned.
func (f *Faulty) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.calls.Add(1)
	p := f.plan()
	if err := p.before(ctx, "GetItem"); err != nil {
		return nil, err
	}
	out, err := f.DB.GetItem(ctx, in, opts...)
	if p.After != nil {
		if ferr := p.After("GetItem", err); ferr != nil {
			return nil, ferr
		}
	}
	return out, err
}

// TransactWriteItems forwards, if DB can, or fails as planned. A client
// without the method fails the call with limiter.ErrNoTransactions.
func (f *Faulty) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.calls.Add(1)
	tx, ok := f.DB.(limiter.TransactAPI)
	if !ok {
		return nil, limiter.ErrNoTransactions
	}
	p := f.plan()
	if err := p.before(ctx, "TransactWriteItems"); err != nil {
		return nil, err
	}
	out, err := tx.TransactWriteItems(ctx, in, opts...)
	if p.After != nil {
		if ferr := p.After("TransactWriteItems", err); ferr != nil {
			return nil, ferr
		}
	}
	return out, err
}

// ErrLostResponse is what LoseResponses returns in place of an answer.
var ErrLostResponse = errors.New("dynamotest: injected: connection reset after the request was sent (the answer is lost)")

// LoseResponses is a fault that lets every call reach the store and then,
// when lose(op) says so, drops its answer, as a connection reset or a
// client timeout after sending would: the write may have landed, and the
// caller cannot see it.
func LoseResponses(lose func(op string) bool) Fault {
	return Fault{After: func(op string, _ error) error {
		if lose(op) {
			return ErrLostResponse
		}
		return nil
	}}
}
