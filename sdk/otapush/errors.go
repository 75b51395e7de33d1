package otapush

import (
	"errors"
	"fmt"
	"net/http"
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
	// Scope is what the refusal is about, as the Judge read it; unstated,
	// the status decides (Concerns).
	Scope Scope
}

// Scope is what a vendor's refusal is about, and so what can be at fault,
// from the narrowest to the widest:
// only a refusal whose scope is ScopeItem or ScopeMessage can be a change's
// fault, and only those are taken apart to find the change. A credential's
// or a hotel's refusal says nothing of the changes sent: they stay pending
// until it is fixed.
type Scope int

const (
	// ScopeUnstated: the answer did not say; Concerns reads the status.
	ScopeUnstated Scope = iota
	// ScopeItem: the vendor named the items it refused.
	ScopeItem
	// ScopeMessage: the vendor refused the message for something in it
	// that it did not name: any of its items may be at fault.
	ScopeMessage
	// ScopeHotel: the hotel or its connection, whatever the message
	// carried: an unknown or deactivated hotel id, a property no longer
	// connected to the channel, an account without access to it.
	ScopeHotel
	// ScopeCredential: the credential itself (a bad login, a revoked
	// key): nothing sent with it can go.
	ScopeCredential
)

func (s Scope) String() string {
	switch s {
	case ScopeItem:
		return "item"
	case ScopeMessage:
		return "message"
	case ScopeHotel:
		return "hotel"
	case ScopeCredential:
		return "credential"
	}
	return "unstated"
}

// Isolable reports whether a change may be at fault: the refusal is worth
// taking apart.
func (s Scope) Isolable() bool { return s == ScopeItem || s == ScopeMessage }

// Concerns is what e is about: its Scope, or, unstated, what the status
// says (401 and 403 the credential, any other the message).
func (e *PermanentError) Concerns() Scope {
	switch {
	case e.Scope != ScopeUnstated:
		return e.Scope
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return ScopeCredential
	}
	return ScopeMessage
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
	// Throttled: the last attempt was throttled (a 429, or the endpoint's
	// throttle statuses), or the push found no token within its budget
	// after one: the bucket is the limiter's to pace, not the push's to
	// give up on.
	Throttled bool
	Cause     error
}

func (e *DeferError) Error() string {
	return fmt.Sprintf("push deferred for %v: %v", e.After, e.Cause)
}

func (e *DeferError) Is(target error) bool { return target == ErrDefer }
func (e *DeferError) Unwrap() error        { return e.Cause }
