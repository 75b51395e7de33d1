package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
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

// slotTokens is how many tokens j's slot books on route.
func slotTokens(route Route, j job.Job) int {
	if route.ItemWeight <= 0 {
		return 1
	}
	return min(tokensFor(j.Items, route.ItemWeight), route.Bucket.Limit.Capacity())
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
// for the others (pushMessages); a message with more items than the
// bucket's capacity could never be paid for at one instant, so such a push
// is first rendered again with at most that many items (messages that fit
// it). A push whose first unit of work needs more tokens than it can have
// now is deferred to book them (its slot is counted wasted); then res is
// set and the push does not go out.
func (d *Dispatcher) charge(ctx context.Context, j job.Job, p Payload, t *task, bucket limiter.Bucket) (Payload, *Result, error) {
	w := t.ItemWeight
	held := max(j.Hold.Tokens, 1)
	if most := largestMessage(p); tokensFor(most, w) > bucket.Limit.Capacity() {
		var res *Result
		var err error
		if p, res, err = d.shrink(ctx, j, p, t, itemsFor(bucket.Limit.Capacity(), w), held, tokensFor(most, w)); res != nil || err != nil {
			return p, res, err
		}
	}
	need := tokensFor(p.Items, w)
	if len(p.Messages) > 0 {
		// The slot pays for the first message; the others book their own.
		need = tokensFor(p.Messages[0].Items, w)
	}
	// One push reaches the vendor at one instant: it may take at most the
	// burst (less the margin), however many tokens have come free since
	// its slot.
	want := min(need, bucket.Limit.Capacity())
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
	if held >= need {
		return p, nil, nil
	}
	return d.shrink(ctx, j, p, t, itemsFor(held, w), held, need)
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
	j.Hold, j.Items = job.Hold{}, big.Items
	res, err := d.deferJob(ctx, j, t, 0, fmt.Sprintf("its first change has %d items: booking their tokens", big.Items))
	res.WastedSlots = 1
	return Payload{}, &res, err
}

// largestMessage is the most items one message of p carries; 0 for a
// push of one request.
func largestMessage(p Payload) int {
	most := 0
	for _, m := range p.Messages {
		most = max(most, m.Items)
	}
	return most
}
