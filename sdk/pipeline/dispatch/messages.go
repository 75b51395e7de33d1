package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// Message is one request of a push in the work's message format (a
// channel's sdk/pipeline/format): a lane's push may become several, split
// by month, items or bytes, and each pays its own tokens. The first goes
// on the job's slot; each later one books its own token as it goes
// (otapush.Request without Reserved), within the push's budget.
type Message struct {
	Method string
	// Path is appended to the route's URL.
	Path string
	// Header is set over the route's (a format's credential header).
	Header http.Header
	Body   []byte
	// Items counts the items the message carries: its tokens on an
	// endpoint metered by items.
	Items int
	// Judge reads the vendor's answer in the message's format.
	Judge otapush.Judge
	// State is the work's own: what the message carries.
	State any
	// Accepted is set by the dispatcher once the vendor applied it.
	Accepted bool
}

// Isolate takes a refused message of several changes apart
// (format.PlanFor; Task.Isolate): the vendor refused something in it, and
// every other change must still reach it. It is told that message i of p
// was refused for good, about its items or the message
// (otapush.Scope.Isolable): never a credential's or a hotel's, which no
// change caused. It returns the messages to send in its place, each
// paying its own tokens, and the dead letters of the changes now known
// refused (alone, or named by the vendor), which the dispatcher sends. It
// may update p.State.
type Isolate func(ctx context.Context, j job.Job, p *Payload, i int, perm *otapush.PermanentError) (parts []Message, dead []Letter, err error)

// Letter is one dead letter: a body a redrive can resend, and why.
type Letter struct{ Body, Reason string }

// pushMessages sends p's messages in order. A message refused for its
// items goes to the task's Isolate, whose parts are sent after; a refusal of the
// credential or the hotel is never taken apart. Until something is
// settled, a failure takes the single push's path (pushFailed: a refused
// credential or hotel pauses and pages there, keeping every change). A
// later message that fails ends the push: what was accepted is settled,
// and the work's next job carries the rest with a slot of its own, and
// so does a push that took a refused message apart and sent none of its
// parts (the work's next push sends them apart: an isolation may take
// more requests than one push's budget, and begun again whole it would
// never end). Later messages end DeadlineMargin before the call's
// deadline (laterMessages), as a job that ran out of its hold does.
func (d *Dispatcher) pushMessages(out settle, j job.Job, t *task, bucket limiter.Bucket, siblings []limiter.Bucket, p Payload, res Result) (Result, *job.Job, error) {
	ctx, iso := out.ctx, t.isolate
	later, stop := d.laterMessages(ctx, out.base)
	defer stop()
	settled := false // something was accepted or dead-lettered
	// split: a refused message was taken apart, which the work keeps
	// (its parts not sent go apart in its next push) even when nothing
	// settled.
	split := false
	// On an endpoint metered by items, the slot may hold more tokens than
	// the first message costs (it booked the items the lane expected):
	// they pay for the next messages, at the same instant, before any
	// books its own.
	spare := 0
	if t.ItemWeight > 0 {
		spare = max(j.Hold.Tokens, 1) - attemptTokens(t.Route, Payload{Items: p.Messages[0].Items})
	}
	for i := 0; i < len(p.Messages); i++ {
		m := p.Messages[i]
		sctx := ctx
		if i > 0 {
			if d.marginBegun(out.base) {
				d.log().Info("the invocation's deadline margin has begun; the lane's next push carries the push's other messages", "job_id", j.ID, "message", i, "of", len(p.Messages))
				break
			}
			sctx = later
		}
		req := otapush.Request{
			Bucket: bucket, Also: t.Also, Siblings: siblings, URL: t.URL + m.Path, Header: mergeHeader(t.Header, m.Header),
			JobID: messageID(j.ID, i), Body: m.Body, Method: m.Method, Judge: m.Judge,
			Tokens: attemptTokens(t.Route, Payload{Items: m.Items}), Reserve: t.Reserve, Horizon: t.Horizon, Quota: t.Quota, Lease: out.lease,
			Shadow: t.Shadow,
		}
		switch {
		case i == 0:
			req.Reserved, req.Slot, req.Stamp = true, j.Hold.At, stampOf(j.Hold)
		case req.Tokens <= spare:
			req.Reserved, req.Slot, spare = true, j.Hold.At, spare-req.Tokens
		}
		if i == 0 {
			// Later messages on the slot's spare tokens leave at the same
			// instant: this answer covers them.
			var ok bool
			var err error
			if res, ok, err = d.silentSlot(ctx, j, t, req, res); !ok {
				return res, nil, err
			}
			if err := d.untilSlot(ctx, t, req.Slot); err != nil {
				return Result{}, nil, err
			}
		}
		req, late := d.spendable(t, req)
		if late {
			res.WastedSlots++
		}
		if err := d.heldQuota(sctx, req, t.Route, i == 0 && j.Hold.Quota); err != nil {
			var ok bool
			if i == 0 {
				if res, ok, err = d.slotQuotaRefused(ctx, j, t, res, err); !ok {
					return res, nil, err
				}
			} else if !t.Shadow {
				// As a later message that failed: the lane's next push
				// carries it, on a slot and a unit of its own.
				d.log().Info("a later message of the push has no unit of the quota; the lane's next push carries it", "job_id", j.ID, "message", i, "err", err)
				break
			}
		}
		if req, late = d.spendable(t, req); late {
			res.WastedSlots++
		}
		resp, concurrent, err := d.sendCounted(sctx, t, req)
		res.Attempts, res.Throttled = res.Attempts+resp.Attempts, res.Throttled+resp.Throttled
		if !concurrent {
			j = d.throttledItems(t.Route, j, m.Items, err)
		}
		var perm *otapush.PermanentError
		switch {
		case err == nil:
			d.acceptedItems(t.Route, m.Items)
			p.Messages[i].Accepted, settled = true, true
			res.Pushes, res.Items, res.Warnings = res.Pushes+1, res.Items+m.Items, res.Warnings+len(resp.Warnings)
			continue
		case errors.As(err, &perm) && perm.Concerns().Isolable() && iso != nil:
			parts, dead, ierr := iso(ctx, j, &p, i, perm)
			if ierr != nil {
				d.log().Warn("taking a refused message apart failed; its changes stay pending", "job_id", j.ID, "err", ierr)
				break
			}
			for _, l := range dead {
				if err := d.Queue.DeadLetter(ctx, l.Body, l.Reason); err != nil {
					return Result{}, nil, err
				}
				d.log().Warn("refused change dead-lettered", "job_id", j.ID, "reason", l.Reason)
			}
			settled, split = settled || len(dead) > 0, split || len(parts) > 0
			res.Refused, res.Isolation = res.Refused+len(dead), res.Isolation+len(parts)
			p.Messages = append(p.Messages, parts...)
			continue
		case i == 0 || !settled && perm != nil:
			out.release()
			return d.pushFailed(out.base, j, t, p, res, err)
		default:
			d.log().Info("a later message of the push failed; the lane's next push carries it", "job_id", j.ID, "message", i, "err", err)
		}
		break
	}
	if !settled && !split {
		// Nothing went: the job comes back as a push that failed would.
		out.release()
		return d.pushFailed(out.base, j, t, p, res, &otapush.DeferError{Cause: errors.New("no message of the push was accepted")})
	}
	res.Outcome = Pushed
	return d.done(out, j, t, p, res)
}

// A push's later messages and the invocation's end.
//
// Each later message of a push books its own token and has its own
// budget, so a push of many (an isolation's parts: a lane with several
// refused changes among many, on a slow vendor, took 36 requests over a
// minute) can outlast the invocation. Cut by the call's context, the push
// settled nothing: what the vendor accepted stayed pending, the refused
// changes found were dead-lettered again, the parts were lost, and the
// job's message came back after the visibility timeout to begin the same
// isolation whole and be cut at the same depth, every time (adversary
// seed 214: a lane's good days never reached the vendor). So the later
// messages stop DeadlineMargin before the call's deadline, as a sleep
// does: none starts in the margin, and one still waiting for its token or
// its answer then is given up, as a later message that failed; the push
// settles what it sent, and the lane's next job carries the rest (its
// parts apart).

// laterMessages is the context a push's later messages go under: the
// push's (under its lease, if it took one), ending DeadlineMargin before
// the call's deadline (call: the push's context before the lease), if it
// has one.
func (d *Dispatcher) laterMessages(push, call context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := call.Deadline()
	if !ok {
		return push, func() {}
	}
	return context.WithDeadline(push, deadline.Add(-d.Policy.DeadlineMargin))
}

// marginBegun reports whether the call's deadline margin has begun by the
// dispatcher's clock: no later message of a push starts then.
func (d *Dispatcher) marginBegun(call context.Context) bool {
	b := sleepBound{Margin: d.Policy.DeadlineMargin}
	b.Deadline, _ = call.Deadline()
	return b.over(d.now())
}

// messageID is the X-Job-Id of message i of a push: the vendor's
// idempotency key, distinct per message so that a vendor dropping repeats
// keeps each of them.
func messageID(id string, i int) string {
	if i == 0 {
		return id
	}
	return fmt.Sprintf("%s#%d", id, i)
}

func mergeHeader(route, m http.Header) http.Header {
	if len(m) == 0 {
		return route
	}
	h := maps.Clone(route)
	if h == nil {
		h = http.Header{}
	}
	maps.Copy(h, m)
	return h
}

// send is where every request of a push goes to the vendor: a step around
// the vendor's request (a fleet-wide in-flight lease, say) hooks in here.
// spendable is req as it may leave now. The grace was checked before the
// push began; a held slot the request reaches later than its grace (a
// claim and render that took long, a lease awaited) is not spent: the
// vendor's window would count the request beside the slots granted since,
// past what the bucket's margin leaves free (docs/design.md, the margin).
// The request books a fresh token instead, as a later message of a push
// does, and late says the held slot went unused. It is asked before a held
// slot takes its unit of a quota (heldQuota), so that a slot late already
// takes none, and again after it, since the take's write is lateness too:
// a slot the take made late leaves its unit spent, as a late grant stays
// charged. The grace is the route's whole bucket's (t.Bucket), also for a
// slot of one of its shards: the vendor counts the shards' requests
// together, and a shard's own grace (its interval, k times the whole's)
// let each of k shards spend a slot that late beside its next one, k
// requests over burst + rate·W where the bound allows one (adversary seed
// 1626: two shards' slots 88–90 ms late, four requests in 40 ms against
// 20/s, burst 2).
func (d *Dispatcher) spendable(t *task, req otapush.Request) (_ otapush.Request, late bool) {
	if !req.Reserved || req.Slot.IsZero() || d.now().Sub(req.Slot) <= d.grace(t.Bucket.Limit) {
		return req, false
	}
	d.log().Info("the push reached its slot past its grace; booking a fresh token", "job_id", req.JobID, "bucket", req.Bucket.Key, "slot", req.Slot, "late", d.now().Sub(req.Slot))
	req.Reserved, req.Slot, req.Stamp = false, time.Time{}, nil
	return req, true
}

// silentSlot ends a push whose held slot lies inside a silence a vendor
// asked since it was booked (silenced). It is asked as the request
// leaves, after the claim, the render and a lease awaited: a slot may be
// spent up to its grace late, seconds on a slow bucket, and a 429 may land
// meanwhile; asked before them, the answer would be that much older
// (the replay of adversary seed 15 still sent a request inside a silence
// then). It comes before the sleep to the slot, which a push not begun
// ahead starts SilenceAfter early for (silenceAsked), and before the grace
// is checked (spendable), so that a slow read makes the slot late rather
// than the request. The slot goes unused and j comes back at the silence's end with
// its work, neither failed nor dropped; a store that cannot say defers it
// for the cooldown (fail closed). ok: the request may leave.
func (d *Dispatcher) silentSlot(ctx context.Context, j job.Job, t *task, req otapush.Request, res Result) (_ Result, ok bool, _ error) {
	if !req.Reserved || t.Shadow {
		return res, true, nil
	}
	until, err := d.silenced(ctx, j, t.Route)
	if err == nil && until.IsZero() {
		return res, true, nil
	}
	var out Result
	if err != nil {
		d.log().Warn("limiter store unavailable for the slot's silence; deferring (fail closed)", "job_id", j.ID, "err", err)
		out, err = d.deferUnheld(ctx, j, t, d.Policy.StoreCooldown, "limiter store unavailable")
		out.StoreError = true
	} else {
		d.log().Info("slot inside a vendor's silence as the push leaves; back at its end", "job_id", j.ID, "slot", req.Slot, "until", until)
		out, err = d.deferUnheld(ctx, j, t, until.Sub(d.now()), silenceReason)
	}
	out.WastedSlots += res.WastedSlots
	out.RevokedSlots += res.RevokedSlots + 1
	return out, false, err
}

func (d *Dispatcher) send(ctx context.Context, req otapush.Request) (otapush.Response, error) {
	return d.Pusher.Push(ctx, req)
}
