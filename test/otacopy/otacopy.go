// Package otacopy rebuilds what a mock OTA holds from the pushes it
// accepted, in arrival order: the value and sequence of every (hotel,
// kind, room type, rate plan, date), and when each sequence first arrived.
// Tests and the pipeline demo check the pipeline against it: it decodes
// the wire format itself and shares no code with sdk/pipeline/syncer;
// BuildWire reads the vendors' XML formats with test/otaformat, which
// shares none with sdk/pipeline/format.
package otacopy

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// Day names one date of one product at an OTA.
type Day struct {
	HotelRef, Kind, RoomType, RatePlan, Date string
}

// Held is what the OTA holds for a Day.
type Held struct {
	Sequence int64
	Values   string // compact JSON
	At       time.Time
}

// Copy is an OTA's copy of the hotels pushed to it.
type Copy struct {
	held map[Day]Held
	// arrivals lists, per Day, each push of it in arrival order.
	arrivals map[Day][]Held
}

// wire is the push body as the OTA reads it.
type wire struct {
	HotelRef string `json:"hotel_ref"`
	Kind     string `json:"kind"`
	Items    []struct {
		RoomType string `json:"room_type"`
		RatePlan string `json:"rate_plan"`
		Days     []struct {
			Date     string          `json:"date"`
			Sequence int64           `json:"sequence"`
			Values   json.RawMessage `json:"values"`
		} `json:"days"`
	} `json:"items"`
}

// Build replays accepted requests in order; the last push of a day wins,
// as at a real OTA.
func Build(accepted []mockota.Request) (*Copy, error) {
	c := &Copy{held: map[Day]Held{}, arrivals: map[Day][]Held{}}
	for _, r := range accepted {
		var w wire
		if err := json.Unmarshal(r.Body, &w); err != nil {
			return nil, fmt.Errorf("push %q: %w", r.JobID, err)
		}
		for _, it := range w.Items {
			for _, d := range it.Days {
				k := Day{HotelRef: w.HotelRef, Kind: w.Kind, RoomType: it.RoomType, RatePlan: it.RatePlan, Date: d.Date}
				h := Held{Sequence: d.Sequence, Values: compact(d.Values), At: r.At}
				c.held[k] = h
				c.arrivals[k] = append(c.arrivals[k], h)
			}
		}
	}
	return c, nil
}

func compact(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Held returns what the OTA holds for d.
func (c *Copy) Held(d Day) (Held, bool) {
	h, ok := c.held[d]
	return h, ok
}

// Reached is when d first arrived with sequence seq or newer.
func (c *Copy) Reached(d Day, seq int64) (time.Time, bool) {
	for _, h := range c.arrivals[d] {
		if h.Sequence >= seq {
			return h.At, true
		}
	}
	return time.Time{}, false
}

// Items counts the (day, push) pairs the OTA received.
func (c *Copy) Items() int {
	n := 0
	for _, a := range c.arrivals {
		n += len(a)
	}
	return n
}

// Values encodes values as Held.Values does, for comparing a PMS value.
func Values(v any) string {
	b, _ := json.Marshal(v)
	return compact(b)
}
