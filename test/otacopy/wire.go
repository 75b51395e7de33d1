package otacopy

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otaformat"
)

// BuildWire is Build for a mock OTA that took a vendor's format
// (mockota.WireOpenTravel or mockota.WireExpediaAR), decoded with
// test/otaformat, which shares no code with the encoders. Each kind of
// request is a delta: a field it sets replaces that field of the day, the
// others stay. These formats carry no sequence: Held.Sequence is 0, and
// ReachedValues tells when a value arrived.
func BuildWire(accepted []mockota.Request, format string) (*Copy, error) {
	decode := otaformat.DecodeOpenTravel
	switch format {
	case mockota.WireOpenTravel:
	case mockota.WireExpediaAR:
		decode = otaformat.DecodeExpediaAR
	default:
		return nil, fmt.Errorf("otacopy: format %q, want %q or %q", format, mockota.WireOpenTravel, mockota.WireExpediaAR)
	}
	c := &Copy{held: map[Day]Held{}, arrivals: map[Day][]Held{}}
	fields := map[Day]map[string]any{}
	for _, r := range accepted {
		m, err := decode(r.Body, r.Endpoint, otaformat.Rules{})
		if err != nil {
			return nil, fmt.Errorf("push %q: %w", r.JobID, err)
		}
		for k, v := range m.Values {
			d := Day{HotelRef: k.Hotel, Kind: k.Kind, RoomType: k.RoomType, RatePlan: k.RatePlan, Date: k.Date}
			if fields[d] == nil {
				fields[d] = map[string]any{}
			}
			for f, x := range v {
				fields[d][f] = x
			}
			b, _ := json.Marshal(fields[d])
			h := Held{Values: string(b), At: r.At}
			c.held[d] = h
			c.arrivals[d] = append(c.arrivals[d], h)
		}
	}
	return c, nil
}

// ReachedValues is when d first held values (compact JSON, as Values
// encodes them), for copies built from formats without sequences.
func (c *Copy) ReachedValues(d Day, values string) (time.Time, bool) {
	for _, h := range c.arrivals[d] {
		if h.Values == values {
			return h.At, true
		}
	}
	return time.Time{}, false
}

// ReachedAfter is when d first held values (compact JSON) at or after
// after: for formats without sequences, when a change that set them
// arrived, not an earlier one that set the same.
func (c *Copy) ReachedAfter(d Day, values string, after time.Time) (time.Time, bool) {
	for _, h := range c.arrivals[d] {
		if h.Values == values && !h.At.Before(after) {
			return h.At, true
		}
	}
	return time.Time{}, false
}
