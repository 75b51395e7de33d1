package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// updateItem sends one write through the gateway. A failed condition comes
// back as the SDK's error, for the caller to read ALL_OLD; every other
// failure comes back classified as a *StoreError.
func (l *Limiter) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	var out *dynamodb.UpdateItemOutput
	err := l.gateway(ctx, "UpdateItem", func(ctx context.Context) (err error) {
		out, err = l.db.UpdateItem(ctx, in, optFns...)
		return err
	})
	return out, err
}

// updatePenalty is updateItem for a write that records a vendor's
// silence (Penalize, Throttle), which an open circuit breaker does not
// hold back. The breaker saves calls whose answer, a deferral, is the same
// either way; a silence not written is one the other workers never hear
// of, so its holder asks again while the store is out (otapush does), and
// only a call tells it the store is back.
func (l *Limiter) updatePenalty(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	var out *dynamodb.UpdateItemOutput
	err := l.call(ctx, "UpdateItem", false, func(ctx context.Context) (err error) {
		out, err = l.db.UpdateItem(ctx, in, optFns...)
		return err
	})
	return out, err
}

// gateway is the one way to DynamoDB: every call the limiter makes (grants,
// resets, reads, fences, transactions; a penalty's write through call)
// goes through it, so an open circuit breaker stops all but a penalty's
// write, and every outcome feeds it. send
// makes the call, bounded by the per-attempt timeout. An error that is the
// store's answer (a failed condition, a cancelled transaction) comes back
// as it is and counts as a success: the store was reached. Every other
// failure comes back classified as a *StoreError.
func (l *Limiter) gateway(ctx context.Context, op string, send func(ctx context.Context) error) error {
	return l.call(ctx, op, true, send)
}

// call is gateway, asking the breaker first only if gated.
func (l *Limiter) call(ctx context.Context, op string, gated bool, send func(ctx context.Context) error) error {
	if gated && l.breaker != nil {
		if err := l.breaker.Allow(l.now()); err != nil {
			return &StoreError{Table: l.table, Op: op, kind: ErrUnavailable, Err: err}
		}
	}
	actx, cancel := context.WithTimeout(ctx, l.attemptTimeout)
	defer cancel()
	err := send(actx)
	if err == nil || answered(err) {
		l.recordStore(true)
		return err
	}
	return l.storeFailure(ctx, actx, op, err)
}

// answered reports an error that is the store's answer to a well-formed
// call: a failed condition, or a transaction cancelled (for a failed
// condition, a conflict or throttling, which its reasons tell apart).
func answered(err error) bool {
	var canceled *types.TransactionCanceledException
	_, failed := conditionFailed(err)
	return failed || errors.As(err, &canceled)
}

// storeFailure classifies a failed call and tells the breaker: a conflicting
// transaction is contention and tells it nothing; a caller that cancelled
// tells it nothing; an attempt or caller deadline that expired is a store
// failure, as is anything unavailable.
func (l *Limiter) storeFailure(ctx, actx context.Context, op string, err error) error {
	var conflict *types.TransactionConflictException
	if errors.As(err, &conflict) {
		return &conflictError{err: err}
	}
	serr := l.storeError(ctx, op, err)
	if ctx.Err() == nil && actx.Err() != nil {
		serr = &StoreError{Table: l.table, Op: op, kind: ErrUnavailable,
			Err: fmt.Errorf("%w: %w", &AttemptTimeoutError{Op: op, Timeout: l.attemptTimeout}, err)}
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
	case errors.Is(serr, ErrUnavailable), errors.Is(ctx.Err(), context.DeadlineExceeded):
		l.recordStore(false)
	default:
		l.recordStore(true)
	}
	return serr
}

// conflictError marks a store error that is contention (an UpdateItem on an
// item inside an in-flight transaction): retried with backoff, never fed to
// the breaker, and reported as ErrContended when the attempts run out.
type conflictError struct{ err error }

func (e *conflictError) Error() string { return e.err.Error() }
func (e *conflictError) Unwrap() error { return e.err }

func isConflict(err error) bool {
	var c *conflictError
	return errors.As(err, &c)
}

// backoff is the pause before retry number i (1-based) after a store error
// or a conflict: full jitter over an exponential ceiling of 10ms·2^(i−1),
// capped at 500ms, so that workers that failed together do not retry
// together. The caller's ctx bounds it.
func backoff(i int) time.Duration {
	ceiling := min(10*time.Millisecond<<min(i-1, 6), 500*time.Millisecond)
	return time.Duration(rand.Int64N(int64(ceiling)) + 1)
}

func (l *Limiter) recordStore(ok bool) {
	if l.breaker != nil {
		l.breaker.Record(l.now(), ok)
	}
}

// storeError classifies a failed call. Only ErrUnavailable is worth another
// attempt.
func (l *Limiter) storeError(ctx context.Context, op string, err error) error {
	var notFound *types.ResourceNotFoundException
	switch {
	case ctx.Err() != nil:
		return &StoreError{Table: l.table, Op: op, kind: ErrOutcomeUnknown, Err: err}
	case errors.As(err, &notFound):
		return &StoreError{Table: l.table, Op: op, kind: ErrTableNotFound, Err: err}
	}
	return &StoreError{Table: l.table, Op: op, kind: ErrUnavailable, Err: err}
}
