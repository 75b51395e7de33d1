package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// Endpoints metered by items (Route.ItemWeight > 0) charge a push one
// token per item × weight, not one per request. A job's slot books the
// tokens of the items it expects (job.Items), at most the burst: a push's
// items reach the vendor at one instant, and the burst is the most tokens
// one instant may take. At its slot the push takes whatever more the
// bucket has free at that instant, and carries as many items as its
// tokens pay for. Tokens are spent at their slot (within grace), never
// gathered over time, so the bucket's bound (burst + rate·T in any window)
// is the vendor's item counter's bound.

// Shrink renders p again with at most items items, in whole units of
// work (a lane's changes), or fails with a *TooBigError when even the
// first unit has more: on an endpoint metered by items, a push carries
// only what its tokens pay for (Task.Shrink).
type Shrink func(ctx context.Context, j job.Job, p Payload, items int) (Payload, error)

// TooBigError says the smallest push a job's work can make has Items
// items, more than the tokens it holds pay for.
type TooBigError struct{ Items int }

func (e *TooBigError) Error() string {
	return fmt.Sprintf("the first unit of work has %d items, more than the tokens held pay for", e.Items)
}

// tokensFor is what items cost at weight w; at least one token.
func tokensFor(items int, w float64) int {
	// The epsilon keeps 3 × 0.1 from costing 1 token more than 0.3 does.
	return max(int(math.Ceil(float64(max(items, 1))*w-1e-9)), 1)
}

// itemsFor is the most items tokens pay for at weight w.
func itemsFor(tokens int, w float64) int { return int(float64(tokens)/w + 1e-9) }

// slotTokens is how many tokens j's slot books on route: the items it
// expects, at most what one request of it may carry (requestTokens).
func (d *Dispatcher) slotTokens(route Route, j job.Job) int {
	if route.ItemWeight <= 0 {
		return 1
	}
	return min(tokensFor(j.Items, route.ItemWeight), d.requestTokens(route, j, route.Bucket))
}

// requestTokens is the most tokens one request of j may cost on bucket:
// its capacity, the most one instant may take, divided by the bucket's
// spacing while it is on probation (limiter.Spacing: the vendor refused
// its first requests after a silence, and one that halved its limit takes
// half the burst; adversary seed 1802, every lane's first push after each
// of its 15-minute silences over the vendor's halved burst), but at least
// one item; or fewer once the vendor throttled larger requests of j
// (job.Fit).
func (d *Dispatcher) requestTokens(route Route, j job.Job, bucket limiter.Bucket) int {
	most := bucket.Limit.Capacity()
	if s := d.Can.Spacing; s != nil {
		if f := s(bucket); f > 1 {
			most = min(most, max(most/int(f), tokensFor(1, route.ItemWeight)))
		}
	}
	if j.Fit > 0 {
		most = min(most, tokensFor(j.Fit, route.ItemWeight))
	}
	return most
}

// fitAfterThrottle is job.Fit after the vendor throttled, to the end of a
// push, a request of items items: half of them, and never more than fit
// was. A vendor that halves its limit, or never published it, can refuse a
// request its bucket takes whole, and answer every try 429 (with a
// Retry-After of 0, as there is no time after which it fits): sent again
// unchanged it would never go, and only a smaller request can. A request
// of one item cannot go smaller, and leaves fit as it was.
func fitAfterThrottle(fit, items int) int {
	if items <= 1 {
		return fit
	}
	half := items / 2
	if fit > 0 {
		return min(fit, half)
	}
	return half
}

// fitOf is the Fit of next, a job the push of j handed back: the smaller
// of the two, where either bounds its requests.
func fitOf(next, j job.Job) int {
	if next.Fit == 0 || j.Fit > 0 && j.Fit < next.Fit {
		return j.Fit
	}
	return next.Fit
}

// throttledByItems reports whether err is a throttle to the end of a push
// on route, an endpoint metered by items (Dispatcher.throttledItems).
func throttledByItems(route Route, err error) bool {
	var later *otapush.DeferError
	return route.ItemWeight > 0 && errors.As(err, &later) && later.Throttled
}

// attemptTokens is what each attempt of a push of p costs: a retry
// resends the whole body, and the vendor counts its items again. charge
// has made p, and each of its messages, fit the bucket's capacity, so the
// cap never cuts what a request carries.
func attemptTokens(route Route, p Payload) int {
	if route.ItemWeight <= 0 {
		return 1
	}
	return min(tokensFor(p.Items, route.ItemWeight), route.Bucket.Limit.Capacity())
}

// charge makes p fit the tokens j holds on an endpoint metered by items:
// it books what more the bucket has free now (one write, only when the
// push has more items than its slot paid for) and shrinks the push to
// what the tokens pay for. A push of several messages pays for each: the
// slot for the first, spare tokens of the slot or a booking of their own
// for the others (pushMessages); a request with more items than the
// bucket's capacity could never be paid for at one instant, nor one larger
// than the vendor took of the job (job.Fit) be taken, so such a push is
// rendered again with at most that many items (requests that fit it), and
// never more than its tokens pay for. A push whose first unit of work
// needs more tokens than it can have now is deferred to book them (its
// slot is counted wasted); then res is set and the push does not go out.
func (d *Dispatcher) charge(ctx context.Context, j job.Job, p Payload, t *task, bucket limiter.Bucket) (Payload, *Result, error) {
	w := t.ItemWeight
	held := max(j.Hold.Tokens, 1)
	limit := d.requestTokens(t.Route, j, bucket)
	// over: a request of the push costs more than one instant may take
	// (limit), so the push is rendered again with at most that many.
	over := tokensFor(largestRequest(p), w) > limit
	need := tokensFor(p.Items, w)
	if len(p.Messages) > 0 {
		// The slot pays for the first message; the others book their own.
		need = tokensFor(p.Messages[0].Items, w)
	}
	// One push reaches the vendor at one instant: it may take at most the
	// burst (less the margin), however many tokens have come free since
	// its slot.
	want := min(need, limit)
	if want > held {
		booker := d.Can.Batch
		if booker == nil {
			return p, nil, fmt.Errorf("job %q: the limiter (%T) cannot book a push's further items", j.ID, d.Limiter)
		}
		// Only slots free now: tokens booked ahead would be spent late.
		b, err := booker(ctx, bucket, limiter.BatchRequest{N: want - held, MaxDelay: 0, Partial: true})
		if _, denied := limiter.RetryAfter(err); err != nil && !denied {
			d.log().Info("booking a push's further items failed; it carries what its slot paid for", "job_id", j.ID, "err", err)
		}
		held += len(b.Slots)
	}
	if t.Shadow {
		return d.shadowCharge(ctx, j, p, t, over, limit)
	}
	if !over && held >= need {
		return p, nil, nil
	}
	// Rendered again once, to the smaller bound: a render that split a
	// change by date leaves nothing a second one could take apart. Never
	// past what is held: a push over the limit whose first message its
	// slot paid for (need ≤ held) packs its changes again into requests
	// of up to that many items, the first of them paid by the same tokens
	// (adversary seed 427: 3 items on a slot of 1 token).
	most := min(limit, held)
	return d.shrink(ctx, j, p, t, itemsFor(most, w), held, need)
}

// shadowCharge is charge's answer for a shadow route, which pushes at
// once whatever tokens it holds (what it booked above is the bucket's
// record of it, as a shadow reservation is): a request larger than one
// instant may take (limit, in tokens) is still rendered again to fit,
// since the vendor could never take it, and one whose first change cannot
// be split goes as it is. Deferred to book its tokens, as an enforced
// push is, a shadow push whose bucket is silenced would be back at once,
// let through with no tokens again, and deferred again until
// max_deferrals expired it, claiming its lane and reading its state each
// time (adversary seed 800).
func (d *Dispatcher) shadowCharge(ctx context.Context, j job.Job, p Payload, t *task, over bool, limit int) (Payload, *Result, error) {
	if !over || t.shrink == nil {
		return p, nil, nil
	}
	small, err := t.shrink(ctx, j, p, itemsFor(limit, t.ItemWeight))
	var big *TooBigError
	if errors.As(err, &big) {
		return p, nil, nil
	}
	return small, nil, err
}

// shrink renders p again with at most items items (held and need, in
// tokens, say why, for the error of a work that cannot shrink). A push
// whose first unit of work has more is deferred to book its tokens.
func (d *Dispatcher) shrink(ctx context.Context, j job.Job, p Payload, t *task, items, held, need int) (Payload, *Result, error) {
	if t.shrink == nil {
		return p, nil, fmt.Errorf("job %q: its push has %d items (%d tokens) and holds %d tokens, and the work (%T) cannot carry fewer", j.ID, p.Items, need, held, t.work)
	}
	small, err := t.shrink(ctx, j, p, items)
	var big *TooBigError
	if !errors.As(err, &big) {
		return small, nil, err
	}
	j.Items = big.Items
	res, err := d.deferUnheld(ctx, j, t, 0, fmt.Sprintf("its first change has %d items: booking their tokens", big.Items))
	res.WastedSlots = 1
	return Payload{}, &res, err
}

// largestRequest is the most items one request of p carries: its
// largest message's, or its own for a push of one request.
func largestRequest(p Payload) int {
	if len(p.Messages) == 0 {
		return p.Items
	}
	most := 0
	for _, m := range p.Messages {
		most = max(most, m.Items)
	}
	return most
}
