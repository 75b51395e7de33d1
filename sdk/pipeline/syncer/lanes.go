package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// pushed is what a push carried, for Done to clear.
type pushed struct {
	lane     lane.ID
	owner    string
	elements []lane.Element
	// more: the push left pending elements out (max_items, max_bytes).
	more bool
	// at is when the push began.
	at time.Time
	// rest is what the claim found pending that the push left out, and
	// state what the push read, for Shrink.
	rest  []lane.Element
	state map[string][]ari.Day
	// whole maps an element whose earlier dates went out already (its
	// pending rest, which the push's elements and rest hold) to the
	// element as the lane holds it, which is what a push clears.
	whole map[lane.Element]lane.Element
	// part is set when the push carries only the first dates of its
	// oldest element, which stays pending with the rest.
	part *partRef
	// sent are the parts of elements whose first messages the vendor
	// accepted while later ones did not go (Done).
	sent []partRef
	// settled is what the vendor refused of the push's messages.
	settled *settlement
	// target is the lane's connection as the push's Begin read it (its
	// codes encode the messages); nil: messages reads it.
	target *config.Target
	// apart are the groups the job's ref names apart (laneRef.Apart).
	apart [][]string
	// bulkOwner is the job's laneRef.BulkOwner.
	bulkOwner string
	// enc is the encoding the job's route resolved; nil: messages reads
	// it from the config.
	enc *encoding
}

// held is e as the lane holds it.
func (p pushed) held(e lane.Element) lane.Element {
	if w, ok := p.whole[e]; ok {
		return w
	}
	return e
}

// next are the parts the lane's next push resumes: the one this push
// made, those it resumed and did not finish (Shrink left them out), and
// those of which it sent the first messages only.
func (p pushed) next() []partRef {
	var out []partRef
	if p.part != nil {
		out = append(out, *p.part)
	}
	for cut, whole := range p.whole {
		if !slices.Contains(p.elements, cut) {
			out = append(out, partRef{Element: whole.String(), From: cut.From})
		}
	}
	out = append(out, p.sent...)
	slices.SortFunc(out, func(a, b partRef) int { return strings.Compare(a.Element, b.Element) })
	return out
}

// cleared is what the push carried in full, as the lane holds it.
func (p pushed) cleared() []lane.Element {
	out := make([]lane.Element, len(p.elements))
	for i, e := range p.elements {
		out[i] = p.held(e)
	}
	return out
}

// Begin claims the lane for the job's push, which also clears what the
// owner's previous push carried and fences off a second delivery of the
// same job, and renders what is pending. The first push of a lane that
// this invocation marked fresh needs no claim (invocation.go): it pushes
// what the mark read, under the mark's token.
func (w *laneWork) Begin(ctx context.Context, j job.Job) (_ job.Job, _ dispatch.Payload, err error) {
	s, inv := w.s, w.inv
	start := s.now()
	id, ref, done, err := w.lane(j)
	if err != nil {
		return j, dispatch.Payload{}, err
	}
	defer func() {
		if err != nil {
			inv.leave(ref.Token) // no push: its lane finishes another time
		}
	}()
	if len(ref.Refused) > 0 {
		return j, dispatch.Payload{}, fmt.Errorf("%w: job %q is a refused change's dead letter, which HandleBatch marks again", dispatch.ErrNothingToPush, j.ID)
	}
	next, p, err := s.claim(ctx, inv, id, ref, done)
	var other *lane.NotOwnerError
	if errors.As(err, &other) && ref.Bulk && j.Hold.Held() && unpushed(other.Pending.Owner) {
		// A live change took the lane while this job waited for its
		// token, and handed it to another bulk job, still waiting for
		// its own: this job's token is granted, so it pushes the lane.
		// A parked lane is left to its chain (unpushed).
		from := laneRef{Token: other.Pending.Owner, Bulk: true}
		if next, p, err = s.claimFromBulk(ctx, inv, id, from.Token); !errors.As(err, &other) {
			ref, done = from, nil
		}
	}
	if errors.As(err, &other) {
		return w.notOwner(j, id, ref, done, other)
	}
	if err != nil {
		if next != ref.Token {
			// The claim may have landed with its answer lost: the lane
			// is then next's, and only this job knows it. The job, back
			// from its deferral, claims from next too.
			ref.Unanswered = append(ref.Unanswered, next)
			ref.Unanswered = ref.Unanswered[max(0, len(ref.Unanswered)-lane.MaxUnanswered):]
			j = w.rebased(j, id, ref, done)
		}
		return j, dispatch.Payload{}, err
	}
	// The part and the groups apart survive a push that does not go out
	// (deferred to book its tokens, or failed): the next one resumes them.
	j = w.rebased(j, id, laneRef{Token: next, Bulk: ref.Bulk, Apart: ref.Apart, BulkOwner: ref.BulkOwner}.withParts(ref.parts()), nil)
	target, connected, err := s.targetOf(ctx, id)
	if err != nil {
		return j, dispatch.Payload{}, err
	} else if !connected {
		return j, dispatch.Payload{}, s.dropDisconnected(ctx, id, next, p)
	}
	if len(p.Elements) == 0 {
		// Another owner's push carried the last of it: ours took the lane
		// over after its lease ran out. A change that lands before the
		// release finds the lane ours and schedules nothing, so the
		// release hands it back and this push carries it.
		if p, err = s.Lanes.Release(ctx, id, next); err != nil {
			return j, dispatch.Payload{}, err
		}
		if len(p.Elements) == 0 {
			return j, dispatch.Payload{}, dispatch.ErrIdle
		}
	}
	if next != ref.Token {
		p = s.mergeOverlaps(ctx, id, p, ref)
	}
	pending, whole := resume(p.Elements, ref.parts())
	pending, handOff := forClass(pending, whole, ref.Bulk)
	if handOff {
		// A live job's slot, and only a resync's elements pending: they go
		// at the bulk class. The slot goes unused.
		if _, err := s.handToBulk(ctx, inv, id, next, nil, j.FirstSeen, ref.BulkOwner, ref.parts()); err != nil {
			return j, dispatch.Payload{}, err
		}
		return j, dispatch.Payload{}, fmt.Errorf("%w: lane %s holds only bulk elements, handed to its bulk push", dispatch.ErrIdle, id)
	}
	var shared *invocation // a fresh lane's first push shares its read
	if next == ref.Token {
		shared = inv
	}
	r, err := s.render(ctx, shared, id, w.enc, pending)
	if err != nil {
		return j, dispatch.Payload{}, err
	}
	st := pushed{lane: id, owner: next, elements: r.elements, more: len(r.elements) < len(pending), at: start,
		rest: pending[len(r.elements):], state: r.state, whole: whole, settled: newSettlement(), target: &target, apart: ref.Apart, enc: w.enc,
		bulkOwner: ref.BulkOwner}
	pay, err := s.payload(ctx, st, r.body, r.items)
	if err != nil {
		return j, dispatch.Payload{}, err
	}
	if len(pay.Messages) == 0 {
		// Every change it carried was unexpressible, and dead-lettered:
		// they leave the lane, and the lane its owner for the next change
		// or the sweep, at once: nothing went to the vendor, so no
		// failure is counted.
		if _, _, err := s.Lanes.Finish(ctx, id, next, st.cleared()); err != nil {
			return j, dispatch.Payload{}, err
		}
		if err := s.Lanes.EndLease(ctx, id, next, false); err != nil {
			var other *lane.NotOwnerError
			if !errors.As(err, &other) {
				return j, dispatch.Payload{}, err
			}
		}
		return j, dispatch.Payload{}, dispatch.ErrIdle
	}
	return j, pay, nil
}

// payload is st's push in its channel's message format; body and items
// are its JSON body (fitBytes), which the json format renders alike.
func (s *Syncer) payload(ctx context.Context, st pushed, body []byte, items int) (dispatch.Payload, error) {
	msgs, err := s.pushMessages(ctx, st)
	if err != nil {
		return dispatch.Payload{}, err
	}
	p := dispatch.Payload{Body: body, Items: items, State: st, Messages: msgs}
	if len(msgs) > 0 {
		p.Body, p.Items = msgs[0].Body, 0
		for _, m := range msgs {
			p.Items += m.Items
		}
	}
	return p, nil
}

// notOwner decides what becomes of a job whose lane has another owner. If
// the lane moved on since the job last looked, the job was a duplicate (or
// outlived its lease) and ends. A bulk job whose lane a live chain holds
// comes back soon, as the chain hands the lane back to it (liveRecheck).
// Otherwise the owner may have died holding the lane: the job comes back
// when its lease runs out, to take over then.
func (w *laneWork) notOwner(j job.Job, id lane.ID, ref laneRef, done []lane.Element, other *lane.NotOwnerError) (job.Job, dispatch.Payload, error) {
	owner := other.Pending.Owner
	if ref.Bulk && owner != "" && !isBulkToken(owner) && (ref.SeenOwner == "" || ref.LiveOwner != owner) {
		// A live change took the lane while this job waited; its chain
		// hands the lane back to this job's token (laneRef.BulkOwner),
		// and sends no job: this one must come back to push it, soon
		// after the chain ends, however long that takes. Waiting for the
		// live owner's lease instead left the lane idle for up to two
		// minutes after the hand-back (the -resync demo: hotel-0's
		// availability in sync after 127.6 s, against 25–30 s). A
		// chain moves the lane to a new token at each push, so the
		// back-off counts every look that found one, whichever.
		if ref.LiveOwner != "" {
			ref.LiveWaits++
		}
		ref.LiveOwner = owner
		at := liveRecheck(w.s.now(), ref.LiveWaits, other.Pending.LeaseUntil)
		j = w.rebased(j, id, ref, done)
		j.Hold = job.Hold{}
		return j, dispatch.Payload{}, &dispatch.RecheckError{At: at, Reason: other.Error()}
	}
	if owner == "" || (ref.SeenOwner != "" && ref.SeenOwner != owner) || (ref.Bulk && isBulkToken(owner)) {
		// A bulk job whose lane another bulk chain holds (pushing,
		// parked, or waiting for its token) ends, as Hold's notHeld ends
		// it: that chain carries the lane's elements, and should it die,
		// its lease lists the lane for the sweep. Waiting for that lease
		// would not end: a parked chain renews it at each deferral, and
		// copies of a resync's job (SQS duplicates) would look again at
		// every renewal, each look booking a turn and a free token, until
		// they crowd out the chain's own turn (adversary seed 1471).
		return j, dispatch.Payload{}, fmt.Errorf("%w: %v", dispatch.ErrNothingToPush, other)
	}
	ref.SeenOwner = owner
	j = w.rebased(j, id, ref, done)
	j.Hold = job.Hold{} // the slot is the owner's to use
	return j, dispatch.Payload{}, &dispatch.RecheckError{
		At: other.Pending.LeaseUntil.Add(time.Second), Reason: other.Error(),
	}
}

// maxLiveRecheck bounds how long a bulk job waits between looks at a
// lane a live chain holds: the most a bulk push lags the chain's end.
const maxLiveRecheck = 8 * time.Second

// liveRecheck is when a bulk job that finds its lane under a live token,
// after waits looks in a row that found one, comes back: a second after
// the first look, doubling to maxLiveRecheck, so a long chain costs a
// few looks a minute (each a deferral, which max_deferrals counts);
// never later than a second past the owner's lease, when a chain that died
// holding the lane lets the job take it over.
func liveRecheck(now time.Time, waits int, leaseUntil time.Time) time.Time {
	at := now.Add(min(time.Second<<min(waits, 3), maxLiveRecheck))
	if end := leaseUntil.Add(time.Second); end.Before(at) && end.After(now) {
		return end
	}
	return at
}

// Done settles a push: it finishes the lane if what the push carried was
// all that was pending, and otherwise returns the lane's next job, whose
// claim clears what this push carried. A push that left elements out
// (over max_items) knows more is pending and does not try.
func (w *laneWork) Done(ctx context.Context, j job.Job, p dispatch.Payload) (*job.Job, error) {
	s := w.s
	st, ok := p.State.(pushed)
	if !ok {
		return nil, fmt.Errorf("job %q: push state %T is not a lane push", j.ID, p.State)
	}
	apart := st.apartNext(p.Messages)
	if acc := st.accepted(p.Messages); len(acc) < len(st.elements) {
		// Some of its messages did not go (a later one failed): the
		// lane's next push carries them with a slot of its own.
		left := without(st.elements, acc)
		st.sent = st.sentParts(p.Messages, left)
		st.rest = append(append([]lane.Element(nil), left...), st.rest...)
		st.elements, st.more = acc, true
	}
	rest := func() []lane.Element { return st.rest }
	if st.more {
		w.inv.leave(st.owner)
	} else {
		released, seen, err := w.finish(ctx, st)
		var other *lane.NotOwnerError
		if errors.As(err, &other) {
			// Our lease ran out mid-push and another took the lane over:
			// what we pushed stays pending and goes out again with its
			// pushes.
			return nil, nil
		}
		if err != nil || released {
			return nil, err
		}
		rest = func() []lane.Element { return without(seen.Elements, st.cleared()) }
	}
	cleared := st.cleared()
	bulk := isBulkToken(st.owner)
	if left := rest(); !bulk && len(left) > 0 && !hasLive(left) {
		// The live changes are out; what is left is a resync's, for the
		// bulk class.
		_, err := s.handToBulk(ctx, w.inv, st.lane, st.owner, cleared, j.FirstSeen, st.bulkOwner, st.next())
		return nil, err
	}
	if isPushingToken(st.owner) {
		return w.parkBulk(ctx, st, cleared, hasLive(rest()))
	}
	ref := laneRef{Token: st.owner, Pushed: make([]string, len(cleared)), Bulk: bulk, Apart: apart, BulkOwner: st.bulkOwner}.withParts(st.next())
	for i, e := range cleared {
		ref.Pushed[i] = e.String()
	}
	next := w.made(s.pushJob(st.lane, ref, rest), st.lane, ref, cleared)
	// A lane that is still dirty has a backlog: it takes the next slot
	// the bucket has, collecting for only a quarter of the linger, so that
	// the quota is used in full while there is work.
	if !bulk { // a bulk slot is a free token: take it at once
		next = s.lingered(next, st.lane, st.at.Add(s.lingerOf(st.lane)/4))
	}
	return &next, nil
}

// parkBulk settles a bulk push that left the lane dirty: the lane leaves
// its pushing token, clearing what the push carried, so that a live
// change may take it while the next bulk job waits for its token. Live
// changes that came during the push (live: known so far) go at the live
// class at once: the lane is handed to a live job (handToLive), which
// they waited one bulk push for.
func (w *laneWork) parkBulk(ctx context.Context, st pushed, cleared []lane.Element, live bool) (*job.Job, error) {
	s := w.s
	if live {
		return nil, s.handToLive(ctx, w.inv, st.lane, st.owner, cleared, st.next())
	}
	parked := parkedOf(st.owner)
	p, err := s.Lanes.ClaimAfter(ctx, st.lane, st.owner, nil, parked, cleared)
	var other *lane.NotOwnerError
	if errors.As(err, &other) && other.Pending.Owner == parked {
		p, err = other.Pending, nil // parked, its answer lost
	}
	if errors.As(err, &other) {
		return nil, nil // our lease ran out mid-push: as finish's
	}
	if err != nil {
		return nil, err
	}
	w.inv.claimed(st.owner, parked)
	s.owned.record(parked, p.LeaseUntil, true)
	if len(p.Elements) == 0 {
		// The push carried the last of it (a finish refused by a
		// compaction, say): release the lane, or push what landed.
		p, err = s.Lanes.Release(ctx, st.lane, parked)
		if errors.As(err, &other) {
			return nil, nil
		}
		if err != nil || len(p.Elements) == 0 {
			return nil, err
		}
	}
	if hasLive(p.Elements) {
		// A live change marked the lane while it was parking.
		return nil, s.handToLive(ctx, w.inv, st.lane, parked, nil, st.next())
	}
	ref := laneRef{Token: parked, Bulk: true}.withParts(st.next())
	next := w.made(s.pushJob(st.lane, ref, func() []lane.Element { return p.Elements }), st.lane, ref, nil)
	return &next, nil // a bulk slot is a free token: take it at once
}

// finish clears what st carried and releases the lane if that was all
// pending: with the other lanes of its item that this invocation marked
// fresh, in one write, if st's lane is one of them.
func (w *laneWork) finish(ctx context.Context, st pushed) (bool, lane.Pending, error) {
	d := lane.Done{Lane: st.lane, Owner: st.owner, Elements: st.cleared()}
	if g := w.inv.group(st.owner); g != nil {
		return g.finish(ctx, w.s.Lanes, d)
	}
	return w.s.Lanes.Finish(ctx, d.Lane, d.Owner, d.Elements)
}
