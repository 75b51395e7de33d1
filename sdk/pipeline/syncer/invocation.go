// What one invocation (a HandleBatch of changes) knows of the lanes it
// marked, which saves two kinds of lane writes per change at a fleet's
// load, where nearly every push is the first of a lane its own change just
// woke:
//
//   - the Claim. A fresh mark (lane.Mark.Fresh) made a token unique to this
//     delivery the lane's owner, and its answer is what the lane holds:
//     what a Claim would read. No other delivery holds the token, so no
//     other push of the lane can start while the lease lasts, and the
//     first push of the lane in this invocation goes out on the mark
//     alone (unclaimed). A job that leaves the invocation (deferred,
//     redelivered, dead-lettered and redriven) claims as before.
//   - the Finish of each lane. The lanes of one property and kind share an
//     item, and those this invocation marked fresh are finished together
//     (lane.Store.FinishAll): each such push's Done waits until every
//     other lane of the group has pushed or left the invocation (see
//     finishGroup), then one write clears and releases them all.
//
// And a read: those lanes carry the same elements (one mark added them to
// every lane), so the state their first pushes render is read once
// (invocation.shared). A change that lands after the read is pending on each
// lane beside what the push carried, so the lane's finish fails and its
// next push reads that change's state.

package syncer

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
)

// finishWait bounds how long a push's Done waits for the other lanes of
// its group, in case one leaves the invocation by a path that says
// nothing (its context ended). Every other path says so at once (see
// finishGroup.leave); a lane's lease is far longer.
const finishWait = 5 * time.Second

// invocation is one HandleBatch's knowledge of the lanes it marked fresh,
// keyed by their owner token.
type invocation struct {
	mu     sync.Mutex
	fresh  map[string]lane.Pending
	groups map[string]*finishGroup
	reads  map[string]*sharedRead // by the ranges read (readKey)
	moved  map[string]string      // owner token → the token its claim made owner
	nonce  string                 // every mark token's tail derives from it (markTail)
}

// sharedRead is one ARI read that the first pushes of an item's lanes
// render from; ready is closed once it answered.
type sharedRead struct {
	ready chan struct{}
	state map[string][]ari.Day
	err   error
}

// newInvocation starts what one HandleBatch's jobs share, its mark tokens
// deriving from nonce (newNonce); each job's lane work holds it
// (laneWork.inv). A nil *invocation shares nothing: every method is safe
// on it.
func newInvocation(nonce string) *invocation {
	return &invocation{fresh: map[string]lane.Pending{}, groups: map[string]*finishGroup{}, reads: map[string]*sharedRead{}, moved: map[string]string{}, nonce: nonce}
}

// marked records the fresh marks of one property and kind: their first
// pushes may go out unclaimed, and finish together.
func (inv *invocation) marked(marks []lane.Mark) {
	if inv == nil {
		return
	}
	g := &finishGroup{waiting: map[string]bool{}, done: make(chan struct{}), written: make(chan struct{})}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, m := range marks {
		if m.Fresh {
			inv.fresh[m.Pending.Owner] = m.Pending
			inv.groups[m.Pending.Owner] = g
			g.waiting[m.Pending.Owner] = true
		}
	}
}

// unclaimed takes, once, the pending state a fresh mark of this
// invocation gave token's lane.
func (inv *invocation) unclaimed(token string) (lane.Pending, bool) {
	if inv == nil {
		return lane.Pending{}, false
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	p, ok := inv.fresh[token]
	delete(inv.fresh, token)
	return p, ok
}

// claimed records that a claim moved a lane from token to next.
func (inv *invocation) claimed(token, next string) {
	if inv == nil {
		return
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.moved[token] = next
}

// current is the tokens that own, after this invocation's claims, the
// lanes that tokens owned.
func (inv *invocation) current(tokens []string) []string {
	if inv == nil || len(tokens) == 0 {
		return tokens
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	out := make([]string, len(tokens))
	for i, t := range tokens {
		for n := 0; n < 100 && inv.moved[t] != ""; n++ { // each claim's token is new: no cycle
			t = inv.moved[t]
		}
		out[i] = t
	}
	return out
}

// shared is the read of ranges that the first pushes of this invocation
// asking for the same ranges share: first is true for the one push that
// reads the store and publishes what it read (sharedRead.publish); the
// others wait for it (sharedRead.wait). A nil invocation shares nothing:
// r is nil, and the push reads alone.
func (inv *invocation) shared(ranges []ari.Range) (r *sharedRead, first bool) {
	if inv == nil {
		return nil, false
	}
	k := readKey(ranges)
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if r = inv.reads[k]; r == nil {
		r = &sharedRead{ready: make(chan struct{})}
		inv.reads[k] = r
		return r, true
	}
	return r, false
}

// publish hands the state read (or the read's error) to the pushes that
// wait for it; the state is only ever read.
func (r *sharedRead) publish(state map[string][]ari.Day, err error) {
	r.state, r.err = state, err
	close(r.ready)
}

// wait is the state the first push read, once it is in.
func (r *sharedRead) wait(ctx context.Context) (map[string][]ari.Day, error) {
	select {
	case <-r.ready:
		return r.state, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func readKey(ranges []ari.Range) string {
	var b strings.Builder
	for _, r := range ranges {
		b.WriteString(r.Cell + "\x00" + r.From + "\x00" + r.To + "\x00")
	}
	return b.String()
}

// group is token's finish group, or nil; a token leaves it at once.
func (inv *invocation) group(token string) *finishGroup {
	if inv == nil {
		return nil
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	g := inv.groups[token]
	delete(inv.groups, token)
	return g
}

// leave takes token's lane out of its finish group: its job will not
// finish in this invocation (it claimed, deferred, gave up or has more to
// push), so the others do not wait for it.
func (inv *invocation) leave(token string) {
	if g := inv.group(token); g != nil {
		g.leave(token)
	}
}

// finishGroup gathers the Finish of the lanes of one item that one
// invocation marked fresh: the write goes once no lane is still on its way
// (each has finished or left). Nothing waits on a lock held across a store
// call: waiters wait on channels.
type finishGroup struct {
	mu      sync.Mutex
	waiting map[string]bool // tokens neither finished nor gone
	lanes   []lane.Done
	closed  bool          // the write is under way: later lanes finish alone
	done    chan struct{} // closed once no lane is on its way
	written chan struct{} // closed once out is set
	out     []lane.Finished
}

func (g *finishGroup) leave(token string) {
	g.mu.Lock()
	last := g.waiting[token] && len(g.waiting) == 1
	delete(g.waiting, token)
	g.mu.Unlock()
	if last {
		close(g.done)
	}
}

// finish adds d to the group and waits until the group is complete (or
// finishWait, or ctx, runs out); the first to find it so writes for all.
// Each lane's result is what lane.Store.Finish would have returned.
func (g *finishGroup) finish(ctx context.Context, store *lane.Store, d lane.Done) (bool, lane.Pending, error) {
	g.mu.Lock()
	late := g.closed
	i := len(g.lanes)
	if !late {
		g.lanes = append(g.lanes, d)
	}
	g.mu.Unlock()
	g.leave(d.Owner)
	if late {
		return store.Finish(ctx, d.Lane, d.Owner, d.Elements)
	}
	t := time.NewTimer(finishWait)
	defer t.Stop()
	select {
	case <-g.done:
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	writer := !g.closed
	g.closed = true
	lanes := g.lanes
	g.mu.Unlock()
	if writer {
		g.out = store.FinishAll(ctx, lanes)
		close(g.written)
	} else {
		<-g.written
	}
	r := g.out[i]
	return r.Released, r.Pending, r.Err
}
