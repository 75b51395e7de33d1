// Package ari is the availability, rates and inventory (ARI) side of the
// channel manager: the PMS change event, and the state it is written into.
//
// Events are applied to state keyed by (property, kind, room type, rate
// plan, date), each cell guarded by the per-property sequence, so an event
// delivered late or twice can never regress a cell. Pushes then read the
// state at push time: a late push sends the newest values, not the ones of
// the event that triggered it.
package ari

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// DateLayout is the calendar date format of events and state.
const DateLayout = "2006-01-02"

// ErrInvalid is matched by every error Parse returns: the message can never
// be processed and belongs in the dead-letter queue.
var ErrInvalid = errors.New("invalid PMS change event")

// Envelope is the EventBridge event that carries a change.
type Envelope struct {
	ID         string          `json:"id"`
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	Time       time.Time       `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

// Change is a PMS change event's detail.
type Change struct {
	EventID    string `json:"event_id"`
	PropertyID string `json:"property_id"`
	// Sequence orders a property's changes; a higher one is newer.
	Sequence int64  `json:"sequence"`
	Kind     string `json:"kind"` // availability, rates or restrictions
	RoomType string `json:"room_type"`
	RatePlan string `json:"rate_plan,omitempty"`
	From     string `json:"from"` // first date, inclusive
	To       string `json:"to"`   // last date, inclusive
	// Values are the new values for every date of the range, as the PMS
	// sent them (e.g. {"available": 3} or {"amount": "129.00", "currency": "EUR"}).
	Values map[string]any `json:"values"`
}

// Kinds are the change kinds an event may carry.
var Kinds = []string{"availability", "rates", "restrictions"}

// Parse reads an EventBridge envelope from an SQS body and validates its
// change. maxRangeDays bounds the date range.
func Parse(body string, maxRangeDays int) (Change, error) {
	var env Envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		return Change{}, fmt.Errorf("%w: not JSON: %v", ErrInvalid, err)
	}
	if env.Source != "pms" || len(env.Detail) == 0 {
		return Change{}, fmt.Errorf("%w: not a PMS event (source %q, detail %d bytes)", ErrInvalid, env.Source, len(env.Detail))
	}
	var c Change
	dec := json.NewDecoder(strings.NewReader(string(env.Detail)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Change{}, fmt.Errorf("%w: detail: %v", ErrInvalid, err)
	}
	if err := c.Validate(maxRangeDays); err != nil {
		return Change{}, err
	}
	return c, nil
}

// Validate names the first problem with c.
func (c Change) Validate(maxRangeDays int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalid, c.EventID, fmt.Sprintf(format, args...))
	}
	switch {
	case c.EventID == "":
		return bad("event_id is empty")
	case c.PropertyID == "" || strings.Contains(c.PropertyID, "#"):
		return bad("property_id %q is empty or contains '#'", c.PropertyID)
	case c.Sequence < 1:
		return bad("sequence is %d, want ≥ 1", c.Sequence)
	case !isKind(c.Kind):
		return bad("unknown kind %q, want one of %s", c.Kind, strings.Join(Kinds, ", "))
	case c.RoomType == "" || strings.Contains(c.RoomType, "#") || strings.Contains(c.RatePlan, "#"):
		return bad("room_type %q / rate_plan %q: room_type is required and neither may contain '#'", c.RoomType, c.RatePlan)
	case len(c.Values) == 0:
		return bad("values are empty")
	}
	from, err := time.Parse(DateLayout, c.From)
	if err != nil {
		return bad("from %q is not a date (YYYY-MM-DD)", c.From)
	}
	to, err := time.Parse(DateLayout, c.To)
	if err != nil {
		return bad("to %q is not a date (YYYY-MM-DD)", c.To)
	}
	switch days := int(to.Sub(from).Hours()/24) + 1; {
	case days < 1:
		return bad("date range %s..%s is inverted", c.From, c.To)
	case days > maxRangeDays:
		return bad("date range %s..%s spans %d days, more than the %d allowed", c.From, c.To, days, maxRangeDays)
	}
	return nil
}

// Dates lists the range's dates in order. The change must be valid.
func (c Change) Dates() []string {
	from, _ := time.Parse(DateLayout, c.From)
	to, _ := time.Parse(DateLayout, c.To)
	var ds []string
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		ds = append(ds, d.Format(DateLayout))
	}
	return ds
}

// Cell names the state a change writes: everything but the date.
func (c Change) Cell() string {
	return c.PropertyID + "#" + c.Kind + "#" + c.RoomType + "#" + c.RatePlan
}

func isKind(s string) bool {
	for _, k := range Kinds {
		if s == k {
			return true
		}
	}
	return false
}
