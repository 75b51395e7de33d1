package otapush

import (
	"errors"
	"fmt"
	"time"
)

// Sentinels for errors.Is; the typed errors below match them.
var (
	// ErrPermanent: the vendor refused the request for a reason retrying
	// cannot fix (a 4xx other than 429). Dead-letter the job.
	ErrPermanent = errors.New("permanent push failure")
	// ErrDefer: the push did not go through within its retry budget, or no
	// token could be had; put the job back on the deferred queue.
	ErrDefer = errors.New("push deferred")
)

// PermanentError is a refusal: a 4xx other than 429, or an answer the
// request's Judge read as refused (a 200 whose body carries an error), with
// enough of the response to act on from the dead-letter queue.
type PermanentError struct {
	Status  int
	Summary string // status text and the start of the body, or the Judge's reason
	// Detail is the Judge's Judgement.Detail (nil without a Judge).
	Detail any
}

func (e *PermanentError) Error() string {
	return fmt.Sprintf("vendor refused the push with %d: %s", e.Status, e.Summary)
}

func (e *PermanentError) Is(target error) bool { return target == ErrPermanent }

// DeferError says to try again After from now, and why.
type DeferError struct {
	After time.Duration
	// Status is the last HTTP status seen (0 for a network error or when no
	// request was sent).
	Status int
	Cause  error
}

func (e *DeferError) Error() string {
	return fmt.Sprintf("push deferred for %v: %v", e.After, e.Cause)
}

func (e *DeferError) Is(target error) bool { return target == ErrDefer }
func (e *DeferError) Unwrap() error        { return e.Cause }
