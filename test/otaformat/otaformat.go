// Package otaformat reads the wire formats fleetbucket sends the way the
// vendors do, for tests, the mock OTA and the demo: it decodes an
// OpenTravel (Booking.com B.XML) or Expedia AR request back into (hotel,
// kind, room type, rate plan, date) → values, and refuses what the real
// vendor refuses (a wrong namespace, a missing hotel, more than one month
// per OpenTravel request, more than 5,000 Expedia AR updates, an unmapped
// room type).
//
// It shares no code with sdk/pipeline/format, the encoders it checks: a
// bug on either side shows up as a difference.
package otaformat

import (
	"fmt"
	"strings"
)

// Namespaces the vendors require.
const (
	OpenTravelNS = "http://www.opentravel.org/OTA/2003/05"
	ExpediaARNS  = "http://www.expediaconnect.com/EQC/AR/2011/06"
)

// MaxARUpdates is Expedia AR's cap on one message's updates.
const MaxARUpdates = 5000

// Key is one date of one product at one hotel.
type Key struct {
	Hotel, Kind, RoomType, RatePlan, Date string
}

// Message is what a request asks the vendor to apply.
type Message struct {
	Hotel string
	// Values per key, in the vocabulary of change events: available,
	// closed, amount, currency, guests, min_los, max_los,
	// closed_to_arrival, closed_to_departure (ints as int, flags as bool,
	// amount and currency as string).
	Values map[Key]map[string]any
	// User and Password are the credential the body carried (Expedia AR).
	User, Password string
}

// Rules are what the imitated vendor knows of the hotel.
type Rules struct {
	// MappedRooms are the room types mapped at the vendor; nil maps all.
	MappedRooms map[string]bool
}

func (r Rules) mapped(room string) bool { return r.MappedRooms == nil || r.MappedRooms[room] }

// Refusal is the vendor's refusal of a request: the HTTP status it answers
// with (200 when the vendor reports the error in the body), its error code
// and text, and, for OpenTravel, the LocatorIDs of the parts it refuses.
type Refusal struct {
	Status    int
	Code      string
	Text      string
	RecordIDs []string
	// Type is an OpenTravel error's type (list EWT): 4 authentication, 6
	// authorization; "" is 3, a business rule.
	Type string
}

// ExpediaARBadLogin is Expedia AR's refusal of a login: 1001, inside a 200.
func ExpediaARBadLogin() *Refusal {
	return &Refusal{Status: 200, Code: ARAuth, Text: "Authentication error: invalid username or password"}
}

// ExpediaARHotelDenied is Expedia's 403 for a hotel the account may not
// manage, with its XML error.
func ExpediaARHotelDenied(hotel string) *Refusal {
	return &Refusal{Status: 403, Code: "1000", Text: "Access denied: your account is not authorized to manage hotel " + hotel}
}

// OpenTravelBadLogin is an OpenTravel authentication error (EWT 4) inside a
// 200, as SiteMinder-style vendors answer a bad login.
func OpenTravelBadLogin() *Refusal {
	return &Refusal{Status: 200, Type: "4", Code: "448", Text: "Invalid Username and/or Password"}
}

// OpenTravelHotelDenied is Booking.com's 403 for a hotel the account has no
// access to, or that is no longer connected (EWT 6, ERR 497).
func OpenTravelHotelDenied(hotel string) *Refusal {
	return &Refusal{Status: 403, Type: "6", Code: "497", Text: "You do not have access to hotel:" + hotel}
}

func (r *Refusal) Error() string {
	s := fmt.Sprintf("HTTP %d, %s: %s", r.Status, r.Code, r.Text)
	if len(r.RecordIDs) > 0 {
		s += " (records " + strings.Join(r.RecordIDs, ", ") + ")"
	}
	return s
}

func (m *Message) put(k Key, field string, v any) {
	if m.Values == nil {
		m.Values = map[Key]map[string]any{}
	}
	if m.Values[k] == nil {
		m.Values[k] = map[string]any{}
	}
	m.Values[k][field] = v
}
