package syncer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// A lane's push speaks its channel's message format (sdk/pipeline/format):
// the elements it carries become a format.Work, which format.Encode shapes
// into one or more requests (dispatch.Message), each paying its own tokens.
// The vendor's answer is read by the format (a 200 with an error in its
// body is a refusal), and the lane clears only what it accepted. A refused
// message of several changes is taken apart (Refused, format.PlanFor)
// until the refused change is alone: that change is dead-lettered, with
// the vendor's reason, as a job a redrive turns back into a mark of the
// lane (remark), and leaves the lane's pending set; every other change
// reaches the vendor. Transient failures and throttles are never split:
// the dispatcher retries or defers them, and what they carried stays
// pending.

// settlement is what became of a push's changes besides acceptance,
// shared by every copy of its pushed state.
type settlement struct {
	// dead are the changes dead-lettered (refused alone, named by the
	// vendor, or unexpressible), by their form in the push.
	dead map[lane.Element]bool
	// handled are the messages refused and taken apart: their changes
	// are decided by the parts and dead letters that replaced them.
	handled map[int]bool
	// groups are the changes sent apart, by their messages (apart.go).
	groups []apartGroup
}

func newSettlement() *settlement {
	return &settlement{dead: map[lane.Element]bool{}, handled: map[int]bool{}}
}

// encoding is a lane's channel's format and its endpoint's shape, as its
// job's route resolved them (route).
type encoding struct {
	format format.Format
	shape  format.Shape
}

// encodingOf is the encoding of st, a push of lane id: the one its job's
// route resolved, or, for a push made without a route, id's config read
// now.
func (s *Syncer) encodingOf(id lane.ID, st pushed) (encoding, error) {
	if st.enc != nil {
		return *st.enc, nil
	}
	f, shape, err := s.Config.Channels[id.Channel].Encoding(id.Kind)
	return encoding{format: f, shape: shape}, err
}

// secret is the lane's credential's secret, for the format to place.
func (s *Syncer) secret(id lane.ID) (format.Secret, error) {
	cred, ok := s.Config.Channels[id.Channel].Credentials[id.Credential]
	if !ok {
		return format.Secret{}, fmt.Errorf("channel %q has no credential %q", id.Channel, id.Credential)
	}
	tok, err := s.credential(cred.Ref())
	if err != nil {
		return format.Secret{}, err
	}
	return format.NewSecret(tok), nil
}

// workOf is els' dates with their values in state, as a format.Work: one
// cell per room type and rate plan, in the order of encodePush.
func workOf(id lane.ID, els []lane.Element, state map[string][]ari.Day, secret format.Secret) format.Work {
	cells := cellsOf(id, els, state)
	w := format.Work{HotelRef: id.HotelRef, Kind: id.Kind, Secret: secret}
	for _, c := range cells {
		w.Cells = append(w.Cells, format.Cell{RoomType: c.RoomType, RatePlan: c.RatePlan, Days: c.Days})
	}
	return w
}

// messages encodes els as the format's requests. An element holding a
// value the format cannot carry is dead-lettered at once (in st) and left
// out; the others are encoded without it.
func (s *Syncer) messages(ctx context.Context, id lane.ID, els []lane.Element, st pushed) ([]dispatch.Message, error) {
	enc, err := s.encodingOf(id, st)
	if err != nil {
		return nil, err
	}
	f, shape := enc.format, enc.shape
	if st.settled == nil {
		st.settled = newSettlement()
	}
	secret, err := s.secret(id)
	if err != nil && f.Traits().Credential != format.CredentialToken {
		return nil, err
	}
	// A token format's credential rides in the route's header too
	// (Route), which read it before the push began.
	var t config.Target
	if st.target != nil {
		t = *st.target
	} else if t, _, err = s.targetOf(ctx, id); err != nil {
		return nil, err
	}
	for {
		live := make([]lane.Element, 0, len(els))
		for _, e := range els {
			if !st.settled.dead[e] {
				live = append(live, e)
			}
		}
		if len(live) == 0 {
			return nil, nil
		}
		w := workOf(id, live, st.state, secret)
		w.Codes = t.Codes
		reqs, err := format.Encode(f, w, shape)
		var bad *format.UnexpressibleError
		if errors.As(err, &bad) {
			if err := s.deadLetterUnexpressible(ctx, id, live, st, bad); err != nil {
				return nil, err
			}
			continue
		}
		var unmapped *format.UnmappedError
		if errors.As(err, &unmapped) {
			if err := s.deadLetterUnmappedIn(ctx, id, live, st, unmapped); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		out := make([]dispatch.Message, len(reqs))
		for i, r := range reqs {
			out[i] = messageOf(f, r, carried(live, r.Work))
		}
		return out, nil
	}
}

// deadLetterUnexpressible dead-letters the elements of live holding the
// value bad names, which no push can ever carry.
func (s *Syncer) deadLetterUnexpressible(ctx context.Context, id lane.ID, live []lane.Element, st pushed, bad *format.UnexpressibleError) error {
	n := 0
	for _, e := range live {
		if e.RoomType == bad.RoomType && e.RatePlan == bad.RatePlan && e.From <= bad.Date && bad.Date <= e.To {
			l := s.refusedLetter(id, st.held(e), bad.Error())
			if err := s.Dispatcher.Queue.DeadLetter(ctx, l.Body, l.Reason); err != nil {
				return err
			}
			st.settled.dead[e] = true
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("lane %s: %w (no pending change holds it)", id, bad)
	}
	return nil
}

// carriage is what one message carries: the elements with a date in it,
// and of each the first and last of those dates. A message of one month
// (split_by) carries a part of a change that crosses the month.
type carriage struct {
	elements []lane.Element
	spans    map[lane.Element]span
}

// span is a first and a last date.
type span struct{ from, to string }

// carried is the elements of els with a date in w.
func carried(els []lane.Element, w format.Work) carriage {
	dates := map[[2]string]map[string]bool{}
	for _, c := range w.Cells {
		k := [2]string{c.RoomType, c.RatePlan}
		if dates[k] == nil {
			dates[k] = map[string]bool{}
		}
		for _, d := range c.Days {
			dates[k][d.Date] = true
		}
	}
	out := carriage{spans: map[lane.Element]span{}}
	for _, e := range els {
		in := dates[[2]string{e.RoomType, e.RatePlan}]
		var sp span
		for _, d := range (ari.Change{From: e.From, To: e.To}).Dates() {
			if !in[d] {
				continue
			}
			if sp.from == "" {
				sp.from = d
			}
			sp.to = d
		}
		if sp.from != "" {
			out.elements = append(out.elements, e)
			out.spans[e] = sp
		}
	}
	return out
}

// messageOf is r as the dispatcher sends it, read back by f.
func messageOf(f format.Format, r format.Request, c carriage) dispatch.Message {
	return dispatch.Message{
		Method: r.Method, Path: r.Path, Header: r.Header, Body: r.Body, Items: r.Work.Items(),
		Judge: judge(f, r), State: c,
	}
}

// judge reads an answer to r with f's Decode: never by status alone.
func judge(f format.Format, r format.Request) otapush.Judge {
	return func(status int, h http.Header, body []byte) otapush.Judgement {
		o := f.Decode(r, format.Response{Status: status, Header: h, Body: body, Received: time.Now()})
		switch o.Verdict {
		case format.Accepted, format.AcceptedWithWarnings:
			return otapush.Judgement{Warnings: o.Warnings}
		case format.Throttled:
			return otapush.Judgement{Throttled: true, RetryAfter: o.RetryAfter, Reason: o.Reason}
		case format.Transient:
			return otapush.Judgement{Transient: true, Reason: o.Reason}
		}
		return otapush.Judgement{Refused: true, Reason: o.Reason, Detail: o, Scope: o.Scope}
	}
}

// Refused takes message i of p apart (format.PlanFor): the changes the
// vendor named, or the one left alone, are dead-lettered with its reason;
// the others go again as parts, each its own request. It is a lane
// task's dispatch.Isolate.
func (s *Syncer) Refused(ctx context.Context, j job.Job, p *dispatch.Payload, i int, perm *otapush.PermanentError) ([]dispatch.Message, []dispatch.Letter, error) {
	st, ok := p.State.(pushed)
	if !ok || st.settled == nil {
		return nil, nil, fmt.Errorf("job %q: push state %T is not a lane push", j.ID, p.State)
	}
	c, _ := p.Messages[i].State.(carriage)
	els := c.elements
	outcome, _ := perm.Detail.(format.Outcome)
	reason := perm.Summary
	if reason == "" {
		reason = perm.Error()
	}
	var named []int
	for n, e := range els {
		if outcome.Names(e.RoomType, e.RatePlan, e.From, e.To) {
			named = append(named, n)
		}
	}
	plan := format.PlanFor(format.Refused, len(els), named)
	var dead []dispatch.Letter
	for _, n := range plan.DeadLetter {
		e := els[n]
		if st.settled.dead[e] {
			continue
		}
		dead = append(dead, s.refusedLetter(st.lane, st.held(e), "refused by the vendor: "+reason))
		st.settled.dead[e] = true
	}
	var parts []dispatch.Message
	for _, group := range plan.Push {
		sub := make([]lane.Element, len(group))
		for k, n := range group {
			sub[k] = els[n]
		}
		ms, err := s.messages(ctx, st.lane, sub, st)
		if err != nil {
			return nil, nil, err
		}
		st.settled.sentApart(len(p.Messages)+len(parts), len(ms), sub)
		parts = append(parts, ms...)
	}
	st.settled.handled[i] = true
	return parts, dead, nil
}

// refusedLetter is the dead letter of a change the vendor refused: a job
// that, redriven onto the deferred queue once the cause is fixed (a room
// type mapped), marks the lane with the change again (remark), so that the
// lane's next push carries the state of its dates then.
func (s *Syncer) refusedLetter(id lane.ID, e lane.Element, reason string) dispatch.Letter {
	j := s.laneJob(id, laneRef{Token: "refused", Refused: []string{e.String()}})
	j.ID = id.String() + "@refused@" + e.String()
	body, err := job.Encode(j)
	if err != nil {
		body = j.ID
	}
	return dispatch.Letter{Body: body, Reason: reason}
}

// remark marks the lane a redriven refused change names (refusedLetter)
// with it again, and returns the push job of the lane if it was idle.
func (s *Syncer) remark(ctx context.Context, inv *invocation, j job.Job, id lane.ID, ref laneRef) ([]dispatch.Task, error) {
	var err error
	els := make([]lane.Element, len(ref.Refused))
	for i, e := range ref.Refused {
		if els[i], err = lane.ParseElement(e); err != nil {
			return nil, fmt.Errorf("%w: job %q: %v", job.ErrMalformed, j.ID, err)
		}
	}
	token := markToken(j.ID, id)
	marks, err := s.Lanes.Mark(ctx, []lane.ID{id}, els, func(lane.ID) string { return token })
	if err != nil {
		return nil, err
	}
	var tasks []dispatch.Task
	for _, m := range marks {
		if m.Claimed {
			s.owned.record(token, m.Pending.LeaseUntil, false)
			ref := laneRef{Token: token}
			nj := s.pushJob(m.Lane, ref, func() []lane.Element { return m.Pending.Elements })
			tasks = append(tasks, s.laneTask(inv, nj, m.Lane, ref))
		}
	}
	return tasks, nil
}

// accepted is what the push's messages settled: the elements whose every
// message the vendor accepted (or took apart, its parts accepted), and
// those dead-lettered.
func (p pushed) accepted(msgs []dispatch.Message) []lane.Element {
	if len(msgs) == 0 || p.settled == nil {
		return p.elements
	}
	ok := map[lane.Element]bool{}
	for _, e := range p.elements {
		ok[e] = true
	}
	for i, m := range msgs {
		if m.Accepted || p.settled.handled[i] {
			continue
		}
		c, _ := m.State.(carriage)
		for _, e := range c.elements {
			ok[e] = false
		}
	}
	var out []lane.Element
	for _, e := range p.elements {
		if ok[e] || p.settled.dead[e] {
			out = append(out, e)
		}
	}
	return out
}

// sentParts are the parts of left, elements the push did not settle,
// that its accepted messages sent the first dates of: each resumes after
// them, so that a change crossing a month whose first month went and
// whose second had to wait for a token does not send the first month
// again on every slot and the second never. An element whose accepted
// dates do not all come before the rest's is sent whole again.
func (p pushed) sentParts(msgs []dispatch.Message, left []lane.Element) []partRef {
	var out []partRef
	for _, e := range left {
		var sent, unsent []span
		for i, m := range msgs {
			c, _ := m.State.(carriage)
			sp, ok := c.spans[e]
			switch {
			case !ok || p.settled != nil && p.settled.handled[i]:
			case m.Accepted:
				sent = append(sent, sp)
			default:
				unsent = append(unsent, sp)
			}
		}
		if len(sent) == 0 || len(unsent) == 0 {
			continue
		}
		last := slices.MaxFunc(sent, func(a, b span) int { return strings.Compare(a.to, b.to) }).to
		first := slices.MinFunc(unsent, func(a, b span) int { return strings.Compare(a.from, b.from) }).from
		if last < first {
			out = append(out, partRef{Element: p.held(e).String(), From: first})
		}
	}
	return out
}
