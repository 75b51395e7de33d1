package format

import (
	"errors"
	"fmt"
	"sort"
)

// Splits an endpoint may ask for (connections' "split_by").
const (
	// SplitNone puts dates of any months in one message.
	SplitNone = "none"
	// SplitMonth sends each calendar month in its own messages
	// (Booking.com: "one month per request").
	SplitMonth = "month"
)

// Shape is an endpoint's rules for one message, from the connections
// config. The zero Shape leaves everything to the format.
type Shape struct {
	// MaxItems caps the items (room type × rate plan × date) of one
	// message; 0: no cap beyond the format's Traits.MaxItems.
	MaxItems int
	// MaxBytes caps one message's body: a message over it is split in
	// halves until it fits or carries one item; 0: no cap.
	MaxBytes int
	// SplitBy is SplitNone or SplitMonth; "" takes the format's
	// Traits.SplitBy.
	SplitBy string
	// KindsPerMessage caps the kinds one message mixes; 0 means 1
	// (RateGain wants inventory and restrictions in separate messages).
	KindsPerMessage int
}

// Encode shapes w into messages, in this order: kinds apart (at most
// KindsPerMessage per message), then calendar months apart (SplitBy), then
// at most MaxItems items (the lower of the Shape's and the format's), then
// halves until each body fits MaxBytes. Each message becomes one request,
// in date order; a lane's push becomes all of them, each paying its own
// tokens.
func Encode(f Format, w Work, s Shape) ([]Request, error) {
	t := f.Traits()
	split := SplitOf(f, s)
	maxItems := s.MaxItems
	if t.MaxItems > 0 && (maxItems == 0 || t.MaxItems < maxItems) {
		maxItems = t.MaxItems
	}
	var out []Request
	for _, byKind := range splitKinds(w, max(s.KindsPerMessage, 1)) {
		parts := []Work{byKind}
		if split == SplitMonth {
			parts = splitMonths(byKind)
		}
		for _, p := range parts {
			for _, chunk := range splitItems(p, maxItems) {
				reqs, err := encodeFit(f, chunk, s.MaxBytes)
				if err != nil {
					return nil, err
				}
				out = append(out, reqs...)
			}
		}
	}
	return out, nil
}

// SplitOf is the split Encode applies to f's messages under s: the
// endpoint's SplitBy, or the format's own.
func SplitOf(f Format, s Shape) string {
	if s.SplitBy != "" {
		return s.SplitBy
	}
	return f.Traits().SplitBy
}

// encodeFit encodes w, halving it while its body is over maxBytes and it
// carries more than one item (one item always goes: a body the vendor still
// refuses is dead-lettered with its reason).
func encodeFit(f Format, w Work, maxBytes int) ([]Request, error) {
	r, err := encodeMapped(f, w)
	if err != nil {
		return nil, err
	}
	if maxBytes <= 0 || len(r.Body) <= maxBytes || w.Items() <= 1 {
		return []Request{r}, nil
	}
	parts := splitItems(w, (w.Items()+1)/2)
	var out []Request
	for _, p := range parts {
		rs, err := encodeFit(f, p, maxBytes)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// encodeMapped encodes w with the OTA's ids of its codes (Work.Codes); the
// request's Work, and any cell an error names, keep the PMS codes.
func encodeMapped(f Format, w Work) (Request, error) {
	mapped, back, err := mapCodes(w)
	if err != nil {
		return Request{}, err
	}
	r, err := f.Encode(mapped)
	var bad *UnexpressibleError
	if errors.As(err, &bad) && back != nil {
		if pms, ok := back[[2]string{bad.RoomType, bad.RatePlan}]; ok {
			bad.RoomType, bad.RatePlan = pms[0], pms[1]
		}
	}
	if err != nil {
		return Request{}, err
	}
	r.Work = w
	return r, nil
}

// splitKinds groups w's cells by kind, n kinds per group, kinds in the
// order they first appear.
func splitKinds(w Work, n int) []Work {
	var kinds []string
	byKind := map[string][]Cell{}
	for _, c := range w.Cells {
		k := w.kindOf(c)
		if _, seen := byKind[k]; !seen {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], c)
	}
	var out []Work
	for i := 0; i < len(kinds); i += n {
		group := kinds[i:min(i+n, len(kinds))]
		part := w
		part.Kind, part.Cells = group[0], nil
		for _, k := range group {
			for _, c := range byKind[k] {
				c.Kind = k
				if len(group) == 1 {
					c.Kind = ""
				}
				part.Cells = append(part.Cells, c)
			}
		}
		out = append(out, part)
	}
	if len(out) == 0 {
		out = []Work{w}
	}
	return out
}

// splitMonths cuts w into one Work per calendar month, months in order,
// each keeping the cells (in order) that have dates in it.
func splitMonths(w Work) []Work {
	months := map[string]bool{}
	for _, c := range w.Cells {
		for _, d := range c.Days {
			months[month(d.Date)] = true
		}
	}
	if len(months) <= 1 {
		return []Work{w}
	}
	order := make([]string, 0, len(months))
	for m := range months {
		order = append(order, m)
	}
	sort.Strings(order)
	out := make([]Work, 0, len(order))
	for _, m := range order {
		part := w
		part.Cells = nil
		for _, c := range w.Cells {
			cc := c
			cc.Days = nil
			for _, d := range c.Days {
				if month(d.Date) == m {
					cc.Days = append(cc.Days, d)
				}
			}
			if len(cc.Days) > 0 {
				part.Cells = append(part.Cells, cc)
			}
		}
		out = append(out, part)
	}
	return out
}

func month(date string) string {
	if len(date) < 7 {
		return date
	}
	return date[:7]
}

// splitItems cuts w into consecutive pieces of at most n items, in order;
// a cell's dates may straddle two pieces. n ≤ 0: no cut.
func splitItems(w Work, n int) []Work {
	if n <= 0 || w.Items() <= n {
		return []Work{w}
	}
	var out []Work
	cur := w
	cur.Cells = nil
	room := n
	flush := func() {
		out = append(out, cur)
		cur.Cells, room = nil, n
	}
	for _, c := range w.Cells {
		days := c.Days
		for len(days) > 0 {
			if room == 0 {
				flush()
			}
			take := min(room, len(days))
			cc := c
			cc.Days = days[:take:take]
			cur.Cells = append(cur.Cells, cc)
			days, room = days[take:], room-take
		}
	}
	if len(cur.Cells) > 0 {
		flush()
	}
	return out
}

// checkOneKind refuses work that mixes kinds, for formats whose message
// carries one kind.
func checkOneKind(name string, w Work) error {
	for _, c := range w.Cells {
		if c.Kind != "" && c.Kind != w.Kind {
			return fmt.Errorf("format %s carries one kind per message, got %s and %s: set kinds_per_message to 1", name, w.Kind, c.Kind)
		}
	}
	return nil
}
