package ari

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/internal/strictjson"
)

// DateLayout is the calendar date format of events and state.
const DateLayout = "2006-01-02"

// Bounds of an event, so that an event the state table cannot hold is
// refused when it is parsed, and dead-lettered at once with its reason,
// instead of failing its DynamoDB write on every delivery until redrive.
const (
	// MaxSequence is the largest sequence accepted: 2^53, the largest
	// integer every JSON reader holds exactly. A cell takes only newer
	// sequences, so a runaway sequence (2^63−1) would freeze it for good.
	MaxSequence = 1 << 53
	// MaxValuesBytes caps the JSON of an event's values (8 KiB): they are
	// stored for every date of the month item they fall in (31 of them,
	// 248 KiB at most), and a DynamoDB item holds 400 KB.
	MaxValuesBytes = 8 << 10
	// MaxIDBytes caps event_id, property_id, room_type and rate_plan: the
	// cell they make is a DynamoDB partition key (at most 2048 bytes).
	MaxIDBytes = 256
)

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
// change. maxRangeDays bounds the date range. Besides Validate's checks it
// refuses unknown fields in the detail, a key given twice in any object of
// the body (sequence 1, then 2, would be read as 2), or twice but for case
// where it names a field ("sequence", "Sequence"), and data after it.
func Parse(body string, maxRangeDays int) (Change, error) {
	var env Envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		return Change{}, fmt.Errorf("%w: not JSON: %v", ErrInvalid, err)
	}
	// The shape the body is read as, detail included: "sequence" and
	// "Sequence" both set Change.Sequence, and are refused like a key
	// given twice.
	var shape struct {
		Envelope
		Detail Change `json:"detail"`
	}
	if err := strictjson.CheckFor([]byte(body), &shape); err != nil {
		return Change{}, fmt.Errorf("%w: %v", ErrInvalid, err)
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
	id := c.EventID
	if len(id) > 64 { // the reason travels in a message attribute and log lines
		id = id[:64] + "…"
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalid, id, fmt.Sprintf(format, args...))
	}
	switch {
	case c.EventID == "":
		return bad("event_id is empty")
	case len(c.EventID) > MaxIDBytes || len(c.PropertyID) > MaxIDBytes || len(c.RoomType) > MaxIDBytes || len(c.RatePlan) > MaxIDBytes:
		return bad("event_id, property_id, room_type and rate_plan may have at most %d bytes each", MaxIDBytes)
	case c.PropertyID == "" || strings.Contains(c.PropertyID, "#"):
		return bad("property_id %q is empty or contains '#'", c.PropertyID)
	case c.Sequence < 1 || c.Sequence > MaxSequence:
		return bad("sequence is %d, want 1..%d (2^53)", c.Sequence, int64(MaxSequence))
	case !isKind(c.Kind):
		return bad("unknown kind %q, want one of %s", c.Kind, strings.Join(Kinds, ", "))
	case c.RoomType == "" || strings.Contains(c.RoomType, "#") || strings.Contains(c.RatePlan, "#"):
		return bad("room_type %q / rate_plan %q: room_type is required and neither may contain '#'", c.RoomType, c.RatePlan)
	case len(c.Values) == 0:
		return bad("values are empty")
	}
	if b, err := json.Marshal(c.Values); err != nil {
		return bad("values cannot be stored: %v", err)
	} else if len(b) > MaxValuesBytes {
		return bad("values are %d bytes of JSON, more than the %d allowed", len(b), MaxValuesBytes)
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
	if to.Before(from) {
		return nil
	}
	// Parsed dates are UTC midnights, so a day is exactly 24 hours; every
	// push renders its days through here, and time.Format and AddDate were
	// a twentieth of a storm's CPU: a date is written digit by digit, for
	// years 0000–9999. Nothing else is called, so the render's many
	// expansions of a range are leaves of its path (docs/design.md).
	ds := make([]string, 0, int(to.Sub(from)/(24*time.Hour))+1)
	for d := from; !d.After(to); d = d.Add(24 * time.Hour) {
		y, m, day := d.Date()
		b := [10]byte{
			byte('0' + y/1000%10), byte('0' + y/100%10), byte('0' + y/10%10), byte('0' + y%10), '-',
			byte('0' + int(m)/10), byte('0' + int(m)%10), '-',
			byte('0' + day/10), byte('0' + day%10),
		}
		ds = append(ds, string(b[:]))
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
