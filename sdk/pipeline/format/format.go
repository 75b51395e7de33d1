package format

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
)

// Format is one OTA's wire form of ARI updates. Encode renders one message;
// Split (the package function) shapes a lane's work into messages first, so
// a Format never decides how many requests a push becomes. Decode reads the
// vendor's answer to a request it encoded. A Format is safe for concurrent
// use and holds no state between calls.
type Format interface {
	// Traits says what every message of this format must respect.
	Traits() Traits
	// Encode renders w, already shaped by Split, as one request. It returns
	// an *UnexpressibleError (errors.Is ErrUnexpressible) for a value the
	// format cannot carry, naming the cell and date.
	Encode(w Work) (Request, error)
	// Decode classifies the vendor's answer to req. The status code alone
	// never decides: a 200 whose body carries an error is Refused.
	Decode(req Request, resp Response) Outcome
}

// Traits are a format's own rules, applied by Split on top of the
// endpoint's Shape.
type Traits struct {
	// MaxItems caps the items (room type × rate plan × date) of one
	// message whatever the config says (Expedia AR: 5,000); 0: no cap.
	MaxItems int
	// SplitBy is the split the format asks for when the endpoint sets
	// none: SplitMonth for Booking.com's one calendar month per request.
	SplitBy string
	// Credential is what the format needs from the credential's secret:
	// CredentialToken or CredentialUserPassword.
	Credential string
	// RoomTypeKinds are the kinds whose values a message holds per room
	// type, in a cell with no rate plan (Expedia AR's Inventory,
	// OpenTravel's BookingLimit); a rate plan of the room may still carry
	// a status of its own. A resync of a whole connection reads them so
	// (sdk/pipeline/resync.Cells). Other kinds are held per room type ×
	// rate plan.
	RoomTypeKinds []string
}

// What a format needs from a credential's secret.
const (
	// CredentialToken: the secret is an API token, sent as a bearer token.
	CredentialToken = "token"
	// CredentialUserPassword: the secret is "username:password" (see
	// ParseUserPassword).
	CredentialUserPassword = "user:password"
)

// Work is what a lane has pending, in neutral form: one hotel at one OTA,
// the cells it changes and the current state of each pending date.
type Work struct {
	HotelRef string
	// Kind is availability, rates or restrictions: the kind of every cell
	// that names none.
	Kind  string
	Cells []Cell
	// Secret is the credential's secret, which the format places where the
	// vendor wants it (a header or the body).
	Secret Secret
	// Codes maps the cells' PMS codes to the OTA's ids: Encode (the
	// package function) sends the mapped ids, while the Work of each
	// Request it returns keeps the PMS codes the lane holds.
	Codes Codes
}

// Cell is the pending dates of one room type and rate plan.
type Cell struct {
	RoomType string
	RatePlan string
	// Kind overrides Work.Kind, for work that merges kinds sharing one
	// meter (see Shape.KindsPerMessage).
	Kind string
	// Days are in date order, each date once; Values use the vocabulary of
	// ParseValues (formats other than json refuse anything else).
	Days []ari.Day
}

// kindOf is c's kind within w.
func (w Work) kindOf(c Cell) string {
	if c.Kind != "" {
		return c.Kind
	}
	return w.Kind
}

// Items counts w's items: one per cell and date.
func (w Work) Items() int {
	n := 0
	for _, c := range w.Cells {
		n += len(c.Days)
	}
	return n
}

// Request is one HTTP request a Format rendered, and what it carries.
//
// It holds the credential in clear (a header or the body): String,
// GoString, LogValue and MarshalJSON all give Redacted's form, so a
// Request that reaches a log line or a dead letter carries no secret.
type Request struct {
	Method string
	// Path is appended to the endpoint's URL; "" sends to the URL itself.
	Path   string
	Header http.Header
	Body   []byte
	// Work is what the request carries: what the lane may clear once it
	// is accepted, and what Decode maps the vendor's named items back to.
	Work Work
	// Locators map the ids the request gave its parts (OpenTravel
	// LocatorID, echoed by the vendor as an error's RecordID) to the cell
	// and dates each part carries.
	Locators map[string]Part
}

// Part is a piece of a request: the dates From..To (inclusive) of the
// request's Work.Cells[Cell].
type Part struct {
	Cell     int
	From, To string
}

// Response is the vendor's answer, as read off the wire.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Received is when the answer arrived: a Retry-After given as an
	// HTTP-date counts from it.
	Received time.Time
}

// Verdict is how the vendor took a request.
type Verdict int

// Verdicts, from best to worst for the lane.
const (
	// Accepted: everything was applied; the lane clears what it carried.
	Accepted Verdict = iota + 1
	// AcceptedWithWarnings: applied, with warnings to log and count.
	AcceptedWithWarnings
	// Refused: the vendor will not apply it as sent; retrying it unchanged
	// fails again. Outcome.Refused names the items when the vendor did;
	// Isolate plans what to push again.
	Refused
	// Throttled: over the vendor's limit; push it again, unchanged and
	// unsplit, after Outcome.RetryAfter.
	Throttled
	// Transient: the vendor failed (5xx, an unreadable answer, "retry"
	// codes); push it again, unchanged and unsplit.
	Transient
)

func (v Verdict) String() string {
	switch v {
	case Accepted:
		return "accepted"
	case AcceptedWithWarnings:
		return "accepted-with-warnings"
	case Refused:
		return "refused"
	case Throttled:
		return "throttled"
	case Transient:
		return "transient"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Applied reports whether the vendor applied the request.
func (v Verdict) Applied() bool { return v == Accepted || v == AcceptedWithWarnings }

// Outcome is a Decode's answer.
type Outcome struct {
	Verdict Verdict
	// Warnings are the vendor's warnings (AcceptedWithWarnings), each
	// "code: text".
	Warnings []string
	// Reason is the vendor's error text (Refused, Transient), for the dead
	// letter and the log.
	Reason string
	// Refused are the items the vendor named as refused, mapped back to
	// the request's cells and dates; empty when the vendor refused the
	// whole message without naming any.
	Refused []Cell
	// Scope is what a refusal is about: the items named (ScopeItem), the
	// message (ScopeMessage: any of its items may be at fault), the hotel
	// or its connection (ScopeHotel), or the credential (ScopeCredential).
	// Only the first two can be a change's fault and are taken apart
	// (PlanFor); the others keep every change pending until fixed.
	Scope otapush.Scope
	// RetryAfter is the vendor's Retry-After (Throttled); 0 if it gave none.
	RetryAfter time.Duration
}

// Names reports whether the refused items the vendor named touch the dates
// from..to (inclusive) of a room type and rate plan: how the pipeline finds
// which of its merged changes to dead-letter at once.
func (o Outcome) Names(roomType, ratePlan, from, to string) bool {
	for _, c := range o.Refused {
		if c.RoomType != roomType || c.RatePlan != ratePlan {
			continue
		}
		for _, d := range c.Days {
			if d.Date >= from && d.Date <= to {
				return true
			}
		}
	}
	return false
}

// refusal is a Refused outcome about scope.
func refusal(scope otapush.Scope, reason string) Outcome {
	return Outcome{Verdict: Refused, Reason: reason, Scope: scope}
}

// Status-only outcomes every format shares: 429 is Throttled (with the
// vendor's Retry-After), 5xx Transient.
func byStatus(resp Response) (Outcome, bool) {
	switch {
	case resp.Status == http.StatusTooManyRequests:
		o := Outcome{Verdict: Throttled, Reason: "HTTP 429"}
		if d, err := otapush.ParseRetryAfter(resp.Header.Get("Retry-After"), resp.Received); err == nil {
			o.RetryAfter = d
		}
		return o, true
	case resp.Status >= 500:
		return Outcome{Verdict: Transient, Reason: fmt.Sprintf("HTTP %d: %s", resp.Status, snippet(resp.Body))}, true
	}
	return Outcome{}, false
}

// snippet is the start of a body, for a reason that travels in a message
// attribute.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Format{}
)

// Register makes a format available by name to the connections config
// ("format" of a channel). Call it from an init function, before the config
// is loaded. It panics if name is empty or already registered, as
// database/sql.Register does: both are programming mistakes.
func Register(name string, f Format) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" || f == nil {
		panic("format: Register with an empty name or a nil Format")
	}
	if _, dup := registry[name]; dup {
		panic("format: Register called twice for " + name)
	}
	registry[name] = f
}

// Lookup returns the format registered as name.
func Lookup(name string) (Format, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// Names lists the registered formats, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Names of the built-in formats.
const (
	JSON       = "json"
	OpenTravel = "opentravel"
	ExpediaAR  = "expedia-ar"
)

func init() {
	Register(JSON, jsonFormat{})
	Register(OpenTravel, openTravel{})
	Register(ExpediaAR, expediaAR{})
}
