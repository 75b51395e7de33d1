package sim

import (
	"bytes"
	"encoding/json"
	"math"
)

// pushBody is the json format's push as the vendor reads it.
type pushBody struct {
	HotelRef string     `json:"hotel_ref"`
	Kind     string     `json:"kind"`
	Items    []pushItem `json:"items"`
}

type pushItem struct {
	RoomType string    `json:"room_type"`
	RatePlan string    `json:"rate_plan"`
	Days     []pushDay `json:"days"`
}

type pushDay struct {
	Date     string `json:"date"`
	Sequence int64  `json:"sequence"`
	Values   struct {
		Value *int32 `json:"value"`
		// The XML formats' vocabulary, when a scenario speaks it
		// (ota_formats.go): its one number is the day's value.
		Available *int32 `json:"available"`
		Amount    *int32 `json:"amount"`
		MinLOS    *int32 `json:"min_los"`
	} `json:"values"`
}

// decodePush reads a push body as json.Unmarshal into pushBody would.
// encoding/json's reflection was half the vendors' time in a storm, so
// pushScanner reads the one shape the json format sends (the fields
// above, plain strings and integers) and hands anything else (another
// field, an escape, a null, a fraction) to json.Unmarshal, so that the
// answer is json.Unmarshal's either way.
func decodePush(body []byte) (pushBody, error) {
	s := pushScanner{b: body}
	if p, ok := s.push(); ok {
		return p, nil
	}
	var p pushBody
	err := json.Unmarshal(body, &p)
	for _, it := range p.Items {
		for i := range it.Days {
			v := &it.Days[i].Values
			for _, x := range []*int32{v.Available, v.Amount, v.MinLOS} {
				if v.Value == nil && x != nil {
					v.Value = x
				}
			}
		}
	}
	return p, err
}

// pushScanner reads a push left to right; every method reports false on
// what it does not expect, and the reading stops there.
type pushScanner struct {
	b []byte
	i int
}

func (s *pushScanner) push() (pushBody, bool) {
	var p pushBody
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "hotel_ref":
			return s.str(&p.HotelRef)
		case "kind":
			return s.str(&p.Kind)
		case "items":
			p.Items = make([]pushItem, 0) // json.Unmarshal's [] is empty, not nil
			return s.array(func() bool {
				var it pushItem
				ok := s.item(&it)
				p.Items = append(p.Items, it)
				return ok
			})
		}
		return false
	})
	s.space()
	return p, ok && s.i == len(s.b)
}

func (s *pushScanner) item(it *pushItem) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "room_type":
			return s.str(&it.RoomType)
		case "rate_plan":
			return s.str(&it.RatePlan)
		case "days":
			it.Days = make([]pushDay, 0, 32)
			return s.array(func() bool {
				var d pushDay
				ok := s.day(&d)
				it.Days = append(it.Days, d)
				return ok
			})
		}
		return false
	})
}

func (s *pushScanner) day(d *pushDay) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "date":
			return s.str(&d.Date)
		case "sequence":
			n, ok := s.integer(math.MinInt64, math.MaxInt64)
			d.Sequence = n
			return ok
		case "values":
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "currency":
					var c string
					return s.str(&c)
				case "value", "available", "amount", "min_los":
				default:
					return false
				}
				n, ok := s.integer(math.MinInt32, math.MaxInt32)
				v := int32(n)
				d.Values.Value = &v
				return ok
			})
		}
		return false
	})
}

func (s *pushScanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *pushScanner) peek(c byte) bool {
	s.space()
	return s.i < len(s.b) && s.b[s.i] == c
}

// object reads {"key": value, ...}, field reading each value.
func (s *pushScanner) object(field func(key []byte) bool) bool {
	if !s.peek('{') {
		return false
	}
	s.i++
	if s.peek('}') {
		s.i++
		return true
	}
	for {
		key, ok := s.raw()
		if !ok || !s.peek(':') {
			return false
		}
		s.i++
		if !field(key) {
			return false
		}
		switch {
		case s.peek(','):
			s.i++
		case s.peek('}'):
			s.i++
			return true
		default:
			return false
		}
	}
}

// array reads [value, ...], elem reading each value.
func (s *pushScanner) array(elem func() bool) bool {
	if !s.peek('[') {
		return false
	}
	s.i++
	if s.peek(']') {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch {
		case s.peek(','):
			s.i++
		case s.peek(']'):
			s.i++
			return true
		default:
			return false
		}
	}
}

// raw reads a string of printable ASCII without escapes.
func (s *pushScanner) raw() ([]byte, bool) {
	if !s.peek('"') {
		return nil, false
	}
	start := s.i + 1
	end := bytes.IndexByte(s.b[start:], '"')
	if end < 0 {
		return nil, false
	}
	v := s.b[start : start+end]
	for _, c := range v {
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return nil, false
		}
	}
	s.i = start + end + 1
	return v, true
}

func (s *pushScanner) str(dst *string) bool {
	v, ok := s.raw()
	*dst = string(v)
	return ok
}

// integer reads an integer within [lo, hi] in JSON's number syntax.
func (s *pushScanner) integer(lo, hi int64) (int64, bool) {
	s.space()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start := s.i
	var n int64
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		d := int64(s.b[s.i] - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
		s.i++
	}
	digits := s.i - start
	if digits == 0 || (digits > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, lo <= n && n <= hi
}
