package ari

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/internal/strictjson"
)

// ResyncDetailType is the detail-type of a resync event. It travels on the
// changes bus with source "pms", as changes do, so the rule that brings
// changes to the changes queue brings resyncs too.
const ResyncDetailType = "resync"

// MaxResyncDays bounds a resync's window: two years and a month, what the
// vendors accept ahead (Expedia two years, SiteMinder 750 days).
const MaxResyncDays = 760

// Resync asks for a property's stored state to be pushed again, at the
// bulk class: every cell (room type, rate plan) and date of the window
// that the store holds. It carries no values: each push reads the state
// at push time, so a resync is only lanes made pending.
type Resync struct {
	ResyncID   string `json:"resync_id"`
	PropertyID string `json:"property_id"`
	// Channel limits it to one channel's connection; empty: every one.
	Channel string `json:"channel,omitempty"`
	// Kinds limits it to these kinds; empty: every kind the connections
	// receive.
	Kinds    []string `json:"kinds,omitempty"`
	From, To string   // the window, inclusive
	// Cells limits it to these cells, each over the window or its own
	// dates; empty: every cell the connection's mapping names.
	Cells []ResyncCell `json:"cells,omitempty"`
}

// ResyncCell is one cell of a resync; From and To, if set, narrow the
// resync's window for it (parity's repair names the dates that drifted).
type ResyncCell struct {
	RoomType string `json:"room_type"`
	RatePlan string `json:"rate_plan,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
}

// resyncJSON is Resync on the wire (From and To lower case).
type resyncJSON struct {
	ResyncID   string       `json:"resync_id"`
	PropertyID string       `json:"property_id"`
	Channel    string       `json:"channel,omitempty"`
	Kinds      []string     `json:"kinds,omitempty"`
	From       string       `json:"from"`
	To         string       `json:"to"`
	Cells      []ResyncCell `json:"cells,omitempty"`
}

// MarshalJSON writes r as its event's detail.
func (r Resync) MarshalJSON() ([]byte, error) { return json.Marshal(resyncJSON(r)) }

// UnmarshalJSON reads an event's detail.
func (r *Resync) UnmarshalJSON(b []byte) error {
	var w resyncJSON
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	*r = Resync(w)
	return nil
}

// IsResync reports whether an SQS body is a resync event (by its
// detail-type); Parse reads every other body as a change.
func IsResync(body string) bool {
	var env struct {
		DetailType string `json:"detail-type"`
	}
	return json.Unmarshal([]byte(body), &env) == nil && env.DetailType == ResyncDetailType
}

// ParseResync reads a resync event from an SQS body and validates it, as
// strictly as Parse reads a change.
func ParseResync(body string) (Resync, error) {
	var shape struct {
		Envelope
		Detail resyncJSON `json:"detail"`
	}
	if err := strictjson.CheckFor([]byte(body), &shape); err != nil {
		return Resync{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var env Envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		return Resync{}, fmt.Errorf("%w: not JSON: %v", ErrInvalid, err)
	}
	if env.Source != "pms" || env.DetailType != ResyncDetailType || len(env.Detail) == 0 {
		return Resync{}, fmt.Errorf("%w: not a resync event (source %q, detail-type %q)", ErrInvalid, env.Source, env.DetailType)
	}
	var r Resync
	if err := json.Unmarshal(env.Detail, &r); err != nil {
		return Resync{}, fmt.Errorf("%w: resync detail: %v", ErrInvalid, err)
	}
	return r, r.Validate()
}

// Validate names the first problem with r.
func (r Resync) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: resync %q: %s", ErrInvalid, r.ResyncID, fmt.Sprintf(format, args...))
	}
	switch {
	case r.ResyncID == "" || len(r.ResyncID) > MaxIDBytes:
		return bad("resync_id must have 1..%d bytes", MaxIDBytes)
	case r.PropertyID == "" || strings.Contains(r.PropertyID, "#") || len(r.PropertyID) > MaxIDBytes:
		return bad("property_id %q is empty, too long or contains '#'", r.PropertyID)
	}
	for _, k := range r.Kinds {
		if !isKind(k) {
			return bad("unknown kind %q, want one of %s", k, strings.Join(Kinds, ", "))
		}
	}
	if err := window(r.From, r.To); err != nil {
		return bad("%v", err)
	}
	for _, c := range r.Cells {
		if c.RoomType == "" || strings.ContainsAny(c.RoomType+c.RatePlan, "#") || len(c.RoomType) > MaxIDBytes || len(c.RatePlan) > MaxIDBytes {
			return bad("cell %q/%q: room_type is required and neither may contain '#'", c.RoomType, c.RatePlan)
		}
		if c.From == "" && c.To == "" {
			continue
		}
		if err := window(c.From, c.To); err != nil {
			return bad("cell %s/%s: %v", c.RoomType, c.RatePlan, err)
		}
	}
	return nil
}

func window(from, to string) error {
	f, err := time.Parse(DateLayout, from)
	if err != nil {
		return fmt.Errorf("from %q is not a date (YYYY-MM-DD)", from)
	}
	t, err := time.Parse(DateLayout, to)
	if err != nil {
		return fmt.Errorf("to %q is not a date (YYYY-MM-DD)", to)
	}
	switch days := int(t.Sub(f).Hours()/24) + 1; {
	case days < 1:
		return fmt.Errorf("window %s..%s is inverted", from, to)
	case days > MaxResyncDays:
		return fmt.Errorf("window %s..%s spans %d days, more than the %d allowed", from, to, days, MaxResyncDays)
	}
	return nil
}

// Wants reports whether r covers kind.
func (r Resync) Wants(kind string) bool { return len(r.Kinds) == 0 || slices.Contains(r.Kinds, kind) }

// Event is r as the body of a resync event on the changes bus (or sent
// to the changes queue directly).
func (r Resync) Event(at time.Time) (string, error) {
	detail, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(Envelope{ID: r.ResyncID, Source: "pms", DetailType: ResyncDetailType, Time: at.UTC(), Detail: detail})
	return string(b), err
}
