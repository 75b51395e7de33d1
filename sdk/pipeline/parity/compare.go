package parity

import (
	"encoding/json"
	"math/big"
	"sort"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// Cell names a stored cell: a kind and the PMS's room type and rate plan.
type Cell struct {
	Kind     string `json:"kind"`
	RoomType string `json:"room_type"`
	RatePlan string `json:"rate_plan,omitempty"`
}

// Drift is one date of a cell where the OTA does not hold what is stored.
type Drift struct {
	Cell
	Date string `json:"date"`
	// Sequence and Stored are the stored state of the date: what a repair
	// sends.
	Sequence int64           `json:"sequence"`
	Stored   json.RawMessage `json:"stored"`
	// Held is what the OTA holds of the date; nil when it holds nothing.
	Held *format.Values `json:"held"`
	// Fields are the stored fields the OTA holds otherwise (or not at
	// all), in the vocabulary of format.Values.
	Fields []string `json:"fields"`
}

// Skipped is a stored date the check could not compare, and why: a code
// the connection does not map, or values the channel's format cannot
// carry (the push path dead-letters those).
type Skipped struct {
	Cell
	Date   string `json:"date"`
	Reason string `json:"reason"`
}

// Comparison is what Compare found.
type Comparison struct {
	// Days counts the stored dates compared.
	Days    int
	Drifted []Drift
	Skipped []Skipped
}

// Compare checks every stored date against what the OTA holds (held, in
// the OTA's ids; codes maps the stored cells' PMS codes to them). A date
// drifts when a field its stored values set is held otherwise or not at
// all; a field the stored values leave unset is the OTA's own and never
// drifts. Amounts compare as numbers ("129.5" holds "129.50").
func Compare(stored map[Cell][]ari.Day, held format.Holding, codes format.Codes) Comparison {
	var out Comparison
	cells := make([]Cell, 0, len(stored))
	for c := range stored {
		cells = append(cells, c)
	}
	sort.Slice(cells, func(i, j int) bool { return less(cells[i], cells[j]) })
	for _, c := range cells {
		room, plan, err := codes.Map(c.RoomType, c.RatePlan)
		for _, d := range stored[c] {
			if err != nil {
				out.Skipped = append(out.Skipped, Skipped{Cell: c, Date: d.Date, Reason: err.Error()})
				continue
			}
			want, err := format.ParseValues(c.Kind, d.Values)
			if err != nil {
				out.Skipped = append(out.Skipped, Skipped{Cell: c, Date: d.Date, Reason: err.Error()})
				continue
			}
			out.Days++
			h, ok := held[format.HeldCell{Kind: c.Kind, RoomType: room, RatePlan: plan}][d.Date]
			var got *format.Values
			if ok {
				got = &h
			}
			if fields := differ(want, got); len(fields) > 0 {
				out.Drifted = append(out.Drifted, Drift{Cell: c, Date: d.Date, Sequence: d.Sequence, Stored: d.Values, Held: got, Fields: fields})
			}
		}
	}
	return out
}

func less(a, b Cell) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.RoomType != b.RoomType {
		return a.RoomType < b.RoomType
	}
	return a.RatePlan < b.RatePlan
}

// differ lists the fields want sets that got holds otherwise; every one it
// sets when got is nil.
func differ(want format.Values, got *format.Values) []string {
	var h format.Values
	if got != nil {
		h = *got
	}
	var out []string
	check := func(name string, set, same bool) {
		if set && (got == nil || !same) {
			out = append(out, name)
		}
	}
	check("available", want.Available != nil, eqPtr(want.Available, h.Available))
	check("closed", want.Closed != nil, eqPtr(want.Closed, h.Closed))
	check("amount", want.Amount != "", sameAmount(want.Amount, h.Amount))
	check("currency", want.Currency != "", want.Currency == h.Currency)
	check("min_los", want.MinLOS != nil, eqPtr(want.MinLOS, h.MinLOS))
	check("max_los", want.MaxLOS != nil, eqPtr(want.MaxLOS, h.MaxLOS))
	check("closed_to_arrival", want.ClosedToArrival != nil, eqPtr(want.ClosedToArrival, h.ClosedToArrival))
	check("closed_to_departure", want.ClosedToDeparture != nil, eqPtr(want.ClosedToDeparture, h.ClosedToDeparture))
	return out
}

func eqPtr[T comparable](a, b *T) bool { return a != nil && b != nil && *a == *b }

func sameAmount(a, b string) bool {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && x.Cmp(y) == 0
}
