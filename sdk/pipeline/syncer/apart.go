package syncer

import (
	"context"
	"slices"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// An isolation longer than a push.
//
// A refused message of several changes is taken apart (Refused), each
// part its own request, and a refused part in turn, until the refused
// changes are alone. A push may end before every part went: its budget
// spent on a vendor answering in seconds, or a part's token beyond the
// call's hold on a slow bucket. Begun again from the whole lane, the
// next push would send the refused message whole, be refused again, and
// end at the same depth: a lane with more refused changes than one push
// can isolate never settled, and its good changes never reached the
// vendor. So the parts that did not go are what the isolation learned:
// the lane's next job names them (laneRef.Apart), and its push sends
// each apart, before the lane's other changes. Each push takes the
// isolation at least one request further, and it ends within the bound
// format.Isolate states, over as many pushes as that takes.

// apartGroup is a group of a push's changes sent in messages of their
// own, from..from+n−1 of the push's: a part of a refused message, or a
// group the previous push left apart.
type apartGroup struct {
	from, n  int
	elements []lane.Element
}

// sentApart records that messages from..from+n−1 carry els apart.
func (st *settlement) sentApart(from, n int, els []lane.Element) {
	st.groups = append(st.groups, apartGroup{from: from, n: n, elements: slices.Clone(els)})
}

// apartNext are the groups of p's push that the lane's next push sends
// apart: each with a message the vendor neither accepted nor refused
// (which took it apart in turn), as the lane holds its changes, less
// those dead-lettered.
func (p pushed) apartNext(msgs []dispatch.Message) [][]string {
	if p.settled == nil {
		return nil
	}
	var out [][]string
	for _, g := range p.settled.groups {
		open := false
		for i := g.from; i < g.from+g.n; i++ {
			if i >= len(msgs) || !msgs[i].Accepted && !p.settled.handled[i] {
				open = true
				break
			}
		}
		if !open {
			continue
		}
		var names []string
		for _, e := range g.elements {
			if !p.settled.dead[e] {
				names = append(names, p.held(e).String())
			}
		}
		if len(names) > 0 {
			out = append(out, names)
		}
	}
	return out
}

// pushMessages are the messages of st's push: first each group st.apart
// names apart, then the rest of its elements together.
func (s *Syncer) pushMessages(ctx context.Context, st pushed) ([]dispatch.Message, error) {
	var msgs []dispatch.Message
	in := map[lane.Element]bool{}
	for _, names := range st.apart {
		var group []lane.Element
		for _, e := range st.elements {
			if !in[e] && slices.Contains(names, st.held(e).String()) {
				group, in[e] = append(group, e), true
			}
		}
		if len(group) == 0 {
			continue
		}
		ms, err := s.messages(ctx, st.lane, group, st)
		if err != nil {
			return nil, err
		}
		st.settled.sentApart(len(msgs), len(ms), group)
		msgs = append(msgs, ms...)
	}
	var rest []lane.Element
	for _, e := range st.elements {
		if !in[e] {
			rest = append(rest, e)
		}
	}
	if len(rest) == 0 {
		return msgs, nil
	}
	ms, err := s.messages(ctx, st.lane, rest, st)
	return append(msgs, ms...), err
}
