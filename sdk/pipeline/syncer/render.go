// A lane's push is rendered from what it has pending at the push's slot,
// cut to what one request may carry (the endpoint's max_items and
// max_bytes, the tokens its slot holds on an endpoint metered by items).

package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// Push is the body sent to an OTA: the current state of everything a lane
// has pending, one entry per room type and rate plan.
type Push struct {
	HotelRef string     `json:"hotel_ref"`
	Kind     string     `json:"kind"`
	Items    []PushCell `json:"items"`
}

// PushCell is the pending dates of one room type and rate plan.
type PushCell struct {
	RoomType string    `json:"room_type"`
	RatePlan string    `json:"rate_plan,omitempty"`
	Days     []ari.Day `json:"days"`
}

// Shrink renders a push again with the oldest pending changes that fit in
// items items, for an endpoint metered by items whose bucket had fewer
// tokens free than the push had items. The changes it leaves out stay
// pending for the lane's next push. The changes the push's first render
// dead-lettered (a code its connection does not map, a value its format
// cannot carry) cost no items and stay in it, so that its Done clears
// them: picked by age they would fill the smaller push alone, which
// would then carry no message of its format, and its JSON render would
// go out without the credential a format places in the body (adversary
// seed 663: remap × items).
func (s *Syncer) Shrink(ctx context.Context, j job.Job, p dispatch.Payload, items int) (dispatch.Payload, error) {
	st, ok := p.State.(pushed)
	if !ok {
		return p, fmt.Errorf("job %q: push state %T is not a lane push", j.ID, p.State)
	}
	dead, live := st.deadAndLive()
	if len(live) == 0 {
		return p, fmt.Errorf("job %q: every change of its push was dead-lettered: nothing to render again", j.ID)
	}
	st.elements = live
	els, left := fitWhole(live, items)
	if len(els) == 0 {
		pay, err := s.split(ctx, j, st, dead, items)
		return asMessages(j, pay, err)
	}
	_, maxBytes := s.requestLimits(st.lane)
	body, n, fit, err := fitBytes(st.lane, els, st.state, maxBytes)
	if err != nil {
		return p, err
	}
	st.rest = append(append(append([]lane.Element(nil), els[len(fit):]...), left...), st.rest...)
	st.elements, st.more = append(dead, fit...), true
	pay, err := s.payload(ctx, st, body, n)
	return asMessages(j, pay, err)
}

// deadAndLive are the push's elements its messages dead-lettered, and the
// others, each in order.
func (p pushed) deadAndLive() (dead, live []lane.Element) {
	for _, e := range p.elements {
		if p.settled != nil && p.settled.dead[e] {
			dead = append(dead, e)
		} else {
			live = append(live, e)
		}
	}
	return dead, live
}

// asMessages is a shrunk push, which must go as its format's messages:
// without them the dispatcher would send its JSON render, without the
// credential a format places in the body.
func asMessages(j job.Job, p dispatch.Payload, err error) (dispatch.Payload, error) {
	if err == nil && len(p.Messages) == 0 {
		return dispatch.Payload{}, fmt.Errorf("job %q: its push rendered again carries no message of its format", j.ID)
	}
	return p, err
}

// split pushes the first items dates of the oldest pending element, which
// alone has more items than the push's tokens pay for (a 30-day rate
// change on a burst of 20): it could otherwise never go out. The element
// stays pending; the lane's next push carries its dates from the first one
// left out (laneRef.Part), and clears it when they have all gone. Each
// date goes out with the newest state at its push, so none is left stale.
// dead are the push's dead-lettered elements, which it keeps for its Done
// to clear.
func (s *Syncer) split(ctx context.Context, j job.Job, st pushed, dead []lane.Element, items int) (dispatch.Payload, error) {
	first := st.elements[0]
	dates := (ari.Change{From: first.From, To: first.To}).Dates()
	if items < 1 || items >= len(dates) {
		return dispatch.Payload{}, &dispatch.TooBigError{Items: min(len(dates), 1)}
	}
	head, tail := first, first
	head.To, tail.From = dates[items-1], dates[items]
	_, maxBytes := s.requestLimits(st.lane)
	body, n, err := encodePush(st.lane, []lane.Element{head}, st.state)
	if err != nil {
		return dispatch.Payload{}, err
	}
	if len(body) > maxBytes {
		return dispatch.Payload{}, fmt.Errorf("job %q: the first %d dates of %s are %d bytes, over max_bytes %d", j.ID, items, first, len(body), maxBytes)
	}
	pay, err := s.payload(ctx, pushed{lane: st.lane, elements: []lane.Element{head}, state: st.state, settled: st.settled, target: st.target, enc: st.enc}, body, n)
	if err != nil {
		return pay, err
	}
	if len(pay.Messages) > 1 {
		// The dates cross a boundary the format splits at (split_by
		// month): a later message may fail alone, and the lane's next push
		// resumes after the part's last date, so the dates of that message
		// would never go. The part ends with the first message's dates.
		if c, ok := pay.Messages[0].State.(carriage); ok {
			if sp, ok := c.spans[head]; ok && sp.to < head.To {
				if i := slices.Index(dates, sp.to); i >= 0 {
					return s.split(ctx, j, st, dead, i+1)
				}
			}
		}
	}
	whole := st.held(first)
	st.part = &partRef{Element: whole.String(), From: tail.From}
	st.rest = append(append([]lane.Element{tail}, st.elements[1:]...), st.rest...)
	st.whole = map[lane.Element]lane.Element{tail: whole}
	st.elements, st.more = dead, true
	pay.State = st
	return pay, nil
}

// rendered is a lane's push as render encoded it: its JSON body and item
// count (fitBytes), the elements it carries and the state it read of them.
type rendered struct {
	body     []byte
	items    int
	elements []lane.Element
	state    map[string][]ari.Day
}

// render reads the state of the oldest pending elements that fit the
// endpoint's max_items, in one call, and encodes them (see fitBytes); enc
// is the encoding its job's route resolved. A fresh lane's first push
// shares the read with the other lanes of its item in inv, the invocation
// that marked it (invocation.shared); nil: it reads alone.
func (s *Syncer) render(ctx context.Context, inv *invocation, id lane.ID, enc *encoding, pending []lane.Element) (rendered, error) {
	maxItems, maxBytes := s.requestLimits(id)
	els := fitItems(pending, maxItems)
	if s.byMonth(id, enc) {
		els = wholeMonths(els, pending)
	}
	ranges := make([]ari.Range, len(els))
	for i, e := range els {
		ranges[i] = ari.Range{Cell: cellOf(id, e), From: e.From, To: e.To}
	}
	var state map[string][]ari.Day
	var err error
	switch r, first := inv.shared(ranges); {
	case first:
		state, err = s.State.Read(ctx, ranges)
		r.publish(state, err)
	case r != nil:
		state, err = r.wait(ctx)
	default:
		state, err = s.State.Read(ctx, ranges)
	}
	if err != nil {
		return rendered{}, err
	}
	body, items, els, err := fitBytes(id, els, state, maxBytes)
	return rendered{body: body, items: items, elements: els, state: state}, err
}

// fitBytes encodes els; if the body is over maxBytes it drops the newest
// elements until it fits (one element always goes: max_items admits any
// one change, and a body the vendor still refuses is dead-lettered with
// its reason).
func fitBytes(id lane.ID, els []lane.Element, state map[string][]ari.Day, maxBytes int) ([]byte, int, []lane.Element, error) {
	for {
		body, items, err := encodePush(id, els, state)
		if err != nil || len(body) <= maxBytes || len(els) == 1 {
			return body, items, els, err
		}
		els = els[:len(els)/2]
	}
}

func (s *Syncer) requestLimits(id lane.ID) (int, int) {
	ep := s.Config.Channels[id.Channel].Endpoints[id.Kind]
	return ep.RequestLimits()
}

func cellOf(id lane.ID, e lane.Element) string {
	return ari.Change{PropertyID: id.Property, Kind: id.Kind, RoomType: e.RoomType, RatePlan: e.RatePlan}.Cell()
}

// fitItems is the longest prefix of pending (oldest first) whose distinct
// (cell, date) items number at most maxItems; at least one element.
func fitItems(pending []lane.Element, maxItems int) []lane.Element {
	seen := map[string]bool{}
	for i, e := range pending {
		added := 0
		for _, d := range (ari.Change{From: e.From, To: e.To}).Dates() {
			if k := e.RoomType + "#" + e.RatePlan + "#" + d; !seen[k] {
				seen[k] = true
				added++
			}
		}
		if len(seen) > maxItems && i > 0 {
			return pending[:i]
		}
	}
	return pending
}

// fitWhole picks the pending elements, oldest first, that fit together in
// maxItems distinct (cell, date) items, skipping any that would not fit
// so that the tokens a push holds are spent; rest is the others, in
// order. picked is empty when none fits.
func fitWhole(els []lane.Element, maxItems int) (picked, rest []lane.Element) {
	seen := map[string]bool{}
	for _, e := range els {
		var added []string
		for _, d := range (ari.Change{From: e.From, To: e.To}).Dates() {
			if k := e.RoomType + "#" + e.RatePlan + "#" + d; !seen[k] {
				added = append(added, k)
			}
		}
		if len(seen)+len(added) > maxItems {
			rest = append(rest, e)
			continue
		}
		for _, k := range added {
			seen[k] = true
		}
		picked = append(picked, e)
	}
	return picked, rest
}

// countItems is the distinct (cell, date) items of els.
func countItems(els []lane.Element) int {
	seen := map[string]bool{}
	for _, e := range els {
		for _, d := range (ari.Change{From: e.From, To: e.To}).Dates() {
			seen[e.RoomType+"#"+e.RatePlan+"#"+d] = true
		}
	}
	return len(seen)
}

// without is pending less done.
func without(pending, done []lane.Element) []lane.Element {
	gone := make(map[lane.Element]bool, len(done))
	for _, e := range done {
		gone[e] = true
	}
	var out []lane.Element
	for _, e := range pending {
		if !gone[e] {
			out = append(out, e)
		}
	}
	return out
}

// encodePush renders the elements' dates from state, each (cell, date)
// once, in a stable order.
func encodePush(id lane.ID, els []lane.Element, state map[string][]ari.Day) ([]byte, int, error) {
	push := Push{HotelRef: id.HotelRef, Kind: id.Kind, Items: cellsOf(id, els, state)}
	items := 0
	for _, c := range push.Items {
		items += len(c.Days)
	}
	body, err := json.Marshal(push)
	return body, items, err
}

// cellsOf is the elements' dates with their values in state, each (cell,
// date) once, cells in a stable order.
func cellsOf(id lane.ID, els []lane.Element, state map[string][]ari.Day) []PushCell {
	type cellKey struct{ room, plan string }
	want := map[cellKey]map[string]bool{}
	for _, e := range els {
		k := cellKey{e.RoomType, e.RatePlan}
		if want[k] == nil {
			want[k] = map[string]bool{}
		}
		for _, d := range (ari.Change{From: e.From, To: e.To}).Dates() {
			want[k][d] = true
		}
	}
	keys := make([]cellKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].room != keys[j].room {
			return keys[i].room < keys[j].room
		}
		return keys[i].plan < keys[j].plan
	})
	var out []PushCell
	for _, k := range keys {
		cell := PushCell{RoomType: k.room, RatePlan: k.plan}
		for _, d := range state[cellOf(id, lane.Element{RoomType: k.room, RatePlan: k.plan})] {
			if want[k][d.Date] {
				cell.Days = append(cell.Days, d)
			}
		}
		if len(cell.Days) > 0 {
			out = append(out, cell)
		}
	}
	return out
}
