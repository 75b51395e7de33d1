package mockota

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/fleetbucket/fleetbucket/test/otaformat"
)

// What a Wire vendor holds: its own copy of every product and date, as the
// pushes it applied left it, and as an operator's hand edit changed it
// (Edit, or POST /admin/edit). An expedia-ar vendor answers a
// ProductAvailRateRetrievalRQ (on any endpoint, metered as that endpoint)
// from it. The copy is kept as Expedia keeps its products, not per kind of
// push: a room type's inventory and closed on (room, ""), a rate plan's
// closed, rate and restrictions on (room, plan), so availability and
// restrictions that close a rate plan write the same field.

// heldKey is one date of one product at one hotel.
type heldKey struct {
	hotel string
	otaformat.Product
	date string
}

// hold applies a push the vendor accepted to its copy; the caller holds
// s.mu.
func (s *Server) hold(m otaformat.Message) {
	if s.held == nil {
		s.held = map[heldKey]map[string]any{}
	}
	for k, fields := range m.Values {
		hk := heldKey{hotel: k.Hotel, Product: otaformat.Product{RoomType: k.RoomType, RatePlan: k.RatePlan}, date: k.Date}
		if s.held[hk] == nil {
			s.held[hk] = map[string]any{}
		}
		maps.Copy(s.held[hk], fields)
	}
}

// holdingOf is what the vendor holds of hotel over from..to, by date; the
// caller holds s.mu.
func (s *Server) holdingOf(hotel, from, to string) map[string]map[otaformat.Product]map[string]any {
	out := map[string]map[otaformat.Product]map[string]any{}
	for k, fields := range s.held {
		if k.hotel != hotel || k.date < from || k.date > to {
			continue
		}
		if out[k.date] == nil {
			out[k.date] = map[otaformat.Product]map[string]any{}
		}
		out[k.date][k.Product] = maps.Clone(fields)
	}
	return out
}

// Holds returns the fields the vendor holds for one date of a hotel's
// room type (ratePlan "") or rate plan, nil if none: what a parity check
// must find there.
func (s *Server) Holds(hotel, roomType, ratePlan, date string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.held[heldKey{hotel: hotel, Product: otaformat.Product{RoomType: roomType, RatePlan: ratePlan}, date: date}])
}

// Edit changes fields of what the vendor holds, as a hotelier editing the
// OTA's extranet by hand: nothing fleetbucket sent, and nothing it is told
// of. Fields use the vocabulary of otaformat.Message.Values.
func (s *Server) Edit(hotel, roomType, ratePlan, date string, fields map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold(otaformat.Message{Values: map[otaformat.Key]map[string]any{
		{Hotel: hotel, RoomType: roomType, RatePlan: ratePlan, Date: date}: fields,
	}})
}

// Edit is the body of POST /admin/edit.
type EditRequest struct {
	Hotel    string         `json:"hotel"`
	RoomType string         `json:"room_type"`
	RatePlan string         `json:"rate_plan,omitempty"`
	Date     string         `json:"date"`
	Values   map[string]any `json:"values"`
}

// AdminPrefix starts the mock's own paths, which no vendor has: they are
// neither metered nor recorded.
const AdminPrefix = "/admin/"

// admin serves POST /admin/edit (EditRequest: drift a cell by hand) for a
// test or the demo that runs the mock in another process.
func (s *Server) admin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || strings.TrimPrefix(r.URL.Path, AdminPrefix) != "edit" {
		http.Error(w, "want POST /admin/edit", http.StatusNotFound)
		return
	}
	var e EditRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.UseNumber()
	if err := dec.Decode(&e); err != nil || e.Hotel == "" || e.RoomType == "" || e.Date == "" || len(e.Values) == 0 {
		http.Error(w, fmt.Sprintf("want {hotel, room_type, rate_plan, date, values}: %v", err), http.StatusBadRequest)
		return
	}
	for f, v := range e.Values {
		// Numbers as the decoders read them: counts as int, an amount as
		// its string.
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil && f != "amount" {
				e.Values[f] = int(i)
			} else {
				e.Values[f] = n.String()
			}
		}
	}
	s.Edit(e.Hotel, e.RoomType, e.RatePlan, e.Date, e.Values)
	w.WriteHeader(http.StatusNoContent)
}
