package format

import (
	"fmt"
	"strings"
)

// Reader is a Format that can also read back what the OTA holds of a
// hotel, for a parity check (sdk/pipeline/parity). It is optional: a
// format without it cannot be checked, and the config refuses a "read"
// endpoint on its channel (ReaderOf says which formats can).
//
// A read is a request like a push: it has its own endpoint and limit, and
// draws a token before it goes.
type Reader interface {
	Format
	// ReadTraits says what one read may ask.
	ReadTraits() ReadTraits
	// EncodeRead renders a request for what the OTA holds of q.HotelRef
	// over q.From..q.To (inclusive), in the OTA's own ids.
	EncodeRead(q ReadQuery) (Request, error)
	// DecodeRead reads the answer. The Holding is meaningful only when
	// the Outcome's verdict is Applied (Accepted or
	// AcceptedWithWarnings); a refusal carries its Scope as a push's
	// does.
	DecodeRead(q ReadQuery, resp Response) (Holding, Outcome)
}

// ReadTraits are a Reader's own limits.
type ReadTraits struct {
	// MaxDays is the longest window one read asks for; a longer check is
	// read in windows of MaxDays.
	MaxDays int
}

// ReadQuery is one read: a hotel at the OTA and a window of dates.
type ReadQuery struct {
	HotelRef string
	From, To string
	Secret   Secret
}

// HeldCell names a cell as the OTA holds it: a kind, and the OTA's own
// room and rate plan ids ("" for a room type's own availability).
type HeldCell struct {
	Kind     string `json:"kind,omitempty"`
	RoomType string `json:"room_type"`
	RatePlan string `json:"rate_plan,omitempty"`
}

// Holding is what an OTA holds: per cell, the values of each date it
// answered for, in the vocabulary of Values. A field the OTA did not
// answer is unset.
type Holding map[HeldCell]map[string]Values

// put sets what the OTA holds of one cell and date.
func (h Holding) put(c HeldCell, date string, v Values) {
	if h[c] == nil {
		h[c] = map[string]Values{}
	}
	h[c][date] = v
}

// ReaderOf returns the registered format name as a Reader, or an error
// naming the formats that can read.
func ReaderOf(name string) (Reader, error) {
	f, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("format %q is not registered", name)
	}
	if r, ok := f.(Reader); ok {
		return r, nil
	}
	var can []string
	for _, n := range Names() {
		if f, _ := Lookup(n); f != nil {
			if _, ok := f.(Reader); ok {
				can = append(can, n)
			}
		}
	}
	return nil, fmt.Errorf("format %q cannot read back what the OTA holds; formats that can: %s", name, strings.Join(can, ", "))
}
