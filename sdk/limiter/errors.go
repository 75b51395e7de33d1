package limiter

import (
	"errors"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// Sentinel errors, for errors.Is. Each typed error below matches one of them.
var (
	// ErrInvalidArgument: a bucket, limit, n or duration the limiter refuses
	// before sending anything. The *ArgumentError names the field.
	ErrInvalidArgument = gcra.ErrInvalidArgument
	// ErrNeverGrantable: the request asks for more tokens than the bucket can
	// ever hold (n > burst for a Take); waiting would never help.
	ErrNeverGrantable = gcra.ErrNeverGrantable
	// ErrExhausted: the bucket has no tokens for this request now (or, for a
	// reservation, within its max delay). Use RetryAfter.
	ErrExhausted = errors.New("fleetbucket: rate limit exhausted")
	// ErrUnavailable: the store could not be reached or refused the call.
	// Nothing was granted: fail closed.
	ErrUnavailable = errors.New("fleetbucket: limiter store unavailable")
	// ErrOutcomeUnknown: the context ended after the write was sent, so
	// tokens may or may not have been charged. Nothing was granted to the
	// caller; it is never reported as a denial, which would invite a retry
	// that double-spends.
	ErrOutcomeUnknown = errors.New("fleetbucket: outcome unknown")
	// ErrTableNotFound: the configured table does not exist.
	ErrTableNotFound = errors.New("fleetbucket: table not found")
	// ErrContended: every write of a call lost a race to other workers
	// writing the same bucket (or to a transaction holding its item), so the
	// call ended without a decision. It is not a denial (the bucket may well
	// have tokens) and not an outage: retry promptly, with jitter. The
	// *ContendedError matches neither ErrExhausted nor ErrUnavailable.
	ErrContended = errors.New("fleetbucket: bucket contended, no decision")
)

// ContendedError is a call that sent Writes conditional writes, lost every
// race, and ended without a decision. Err is the last race lost when it was
// a store error (a *types.TransactionConflictException, or a transaction
// cancelled for a conflict), nil when every write failed its condition.
type ContendedError struct {
	Key    string
	Writes int
	Err    error
}

func (e *ContendedError) Error() string {
	msg := fmt.Sprintf("fleetbucket: bucket %q contended: %d write(s) lost races to other workers, no decision; retry promptly", e.Key, e.Writes)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ContendedError) Is(target error) bool { return target == ErrContended }
func (e *ContendedError) Unwrap() error        { return e.Err }

// AttemptTimeoutError is a store call that had no answer within the
// limiter's per-attempt timeout (WithAttemptTimeout). It comes wrapped in a
// *StoreError matching ErrUnavailable, and counts as a store failure for the
// circuit breaker. The write may have landed; the call's retries tell (see
// the package doc on lost answers).
type AttemptTimeoutError struct {
	Op      string
	Timeout time.Duration
}

func (e *AttemptTimeoutError) Error() string {
	return fmt.Sprintf("%s had no answer within the per-attempt timeout of %v (limiter.WithAttemptTimeout)", e.Op, e.Timeout)
}

// ArgumentError is a request refused before it was sent; Field names what
// is wrong ("bucket.key", "limit.rate", "limit.burst", "n", "maxDelay").
type ArgumentError = gcra.ArgumentError

// ExhaustedError is a denial. RetryAfter is exact for the same request: the
// bucket grants it then, unless others take tokens meanwhile.
type ExhaustedError struct {
	Key        string
	N          int
	RetryAfter time.Duration
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("fleetbucket: bucket %q exhausted for %d token(s): retry after %v", e.Key, e.N, e.RetryAfter)
}

func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// StoreError wraps a failure of the DynamoDB call. It matches ErrUnavailable,
// ErrOutcomeUnknown or ErrTableNotFound, and unwraps to the SDK's error.
type StoreError struct {
	Table string
	Op    string
	kind  error
	Err   error
}

func (e *StoreError) Error() string {
	switch e.kind {
	case ErrTableNotFound:
		return fmt.Sprintf("fleetbucket: table %q not found: create it with scripts/localstack.sh start (local), limiter.CreateTable, or deploy the stack (cdk deploy)", e.Table)
	case ErrOutcomeUnknown:
		return fmt.Sprintf("fleetbucket: %s on table %q: outcome unknown, the context ended after the request was sent: %v", e.Op, e.Table, e.Err)
	}
	return fmt.Sprintf("fleetbucket: %s on table %q: store unavailable: %v", e.Op, e.Table, e.Err)
}

func (e *StoreError) Is(target error) bool { return target == e.kind }
func (e *StoreError) Unwrap() error        { return e.Err }

// RetryAfter returns the wait carried by a denial, and whether err is one.
func RetryAfter(err error) (time.Duration, bool) {
	var ex *ExhaustedError
	if errors.As(err, &ex) {
		return ex.RetryAfter, true
	}
	return 0, false
}
