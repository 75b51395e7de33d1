package format

import (
	"errors"
	"fmt"
)

// Codes maps a property's PMS codes to one OTA's own ids, per connection:
// the OTA knows the hotel's double room as "2031455", not as the PMS's
// "DBL". A nil map passes that field's codes through unchanged (an OTA
// set up with the PMS's codes); a map that is set must name every code
// the property sends, and a code it lacks is unmapped.
type Codes struct {
	RoomTypes map[string]string
	RatePlans map[string]string
}

// Mapped reports whether c maps anything: codes that pass through need no
// lookup.
func (c Codes) Mapped() bool { return c.RoomTypes != nil || c.RatePlans != nil }

// Map returns the OTA's ids of a room type and rate plan, or an
// *UnmappedError naming the first code the connection does not map. An
// empty rate plan (availability of a room type) needs no mapping.
func (c Codes) Map(roomType, ratePlan string) (string, string, error) {
	room, plan := roomType, ratePlan
	if c.RoomTypes != nil {
		id, ok := c.RoomTypes[roomType]
		if !ok || id == "" {
			return "", "", &UnmappedError{Field: FieldRoomType, Code: roomType}
		}
		room = id
	}
	if c.RatePlans != nil && ratePlan != "" {
		id, ok := c.RatePlans[ratePlan]
		if !ok || id == "" {
			return "", "", &UnmappedError{Field: FieldRatePlan, Code: ratePlan}
		}
		plan = id
	}
	return room, plan, nil
}

// The fields a code mapping covers, as UnmappedError.Field names them.
const (
	FieldRoomType = "room_type"
	FieldRatePlan = "rate_plan"
)

// ErrUnmapped is matched by every *UnmappedError.
var ErrUnmapped = errors.New("code not mapped to the channel's id")

// UnmappedError is a PMS code a connection does not map. Channel and
// Property are filled in by whoever knows them (the syncer), so the
// reason an operator reads names what to fix and where.
type UnmappedError struct {
	Field    string // FieldRoomType or FieldRatePlan
	Code     string
	Channel  string
	Property string
}

func (e *UnmappedError) Error() string {
	what := "room type"
	if e.Field == FieldRatePlan {
		what = "rate plan"
	}
	return fmt.Sprintf("unmapped %s %q on channel %q of property %q: map it (fleetbucket connections put) and redrive the dead letter",
		what, e.Code, e.Channel, e.Property)
}

// Is makes errors.Is(err, ErrUnmapped) true.
func (e *UnmappedError) Is(target error) bool { return target == ErrUnmapped }

// mapCodes is w with its cells' codes replaced by the OTA's ids, and the
// PMS codes of each mapped (room, plan) pair, to name a cell in an error
// the format returns about the mapped work.
func mapCodes(w Work) (Work, map[[2]string][2]string, error) {
	if !w.Codes.Mapped() {
		return w, nil, nil
	}
	back := map[[2]string][2]string{}
	cells := make([]Cell, len(w.Cells))
	for i, c := range w.Cells {
		room, plan, err := w.Codes.Map(c.RoomType, c.RatePlan)
		if err != nil {
			return w, nil, err
		}
		back[[2]string{room, plan}] = [2]string{c.RoomType, c.RatePlan}
		c.RoomType, c.RatePlan = room, plan
		cells[i] = c
	}
	w.Cells = cells
	return w, back, nil
}
