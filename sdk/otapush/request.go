package otapush

import (
	"net/http"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Request is one push.
type Request struct {
	Bucket limiter.Bucket
	// Also are further buckets every attempt draws from with Bucket, in one
	// transaction (extra windows, a property's share). A 429 penalizes
	// Bucket only: it is what the vendor meters.
	Also   []limiter.Bucket
	URL    string
	JobID  string // sent as X-Job-Id: the vendor's idempotency key
	Body   []byte // JSON
	Header http.Header
	// Reserved says the caller already holds a token (a reservation whose
	// slot has come) for the first attempt; later attempts draw their own.
	Reserved bool
	// Shadow is a shadow route's request (connections' "mode": "shadow"):
	// every attempt goes at once and draws no token, a retry after its
	// backoff or Retry-After alone. The caller booked the push's slot to
	// record what enforcement would do; drawn here, a later message's or a
	// retry's token would wait behind the slots shadow pushes book ahead
	// and never spend, and defer the push (adversary seed 1475: a shadow
	// route on items, every push deferred 7-9 minutes for its next
	// message's tokens, 12 pushes in 5 hours).
	Shadow bool
	// Slot is the time the held token was booked for (with Reserved): the
	// vendor meters the push when it arrives, up to the claim, render and
	// request latency after it.
	Slot time.Time
	// Stamp is the held token's grant on an adaptive bucket (with
	// Reserved; nil if unknown): a throttle on the first attempt tells the
	// limiter which rate it was granted at.
	Stamp *limiter.Stamp
	// Siblings are the other shards of a sharded bucket (Bucket is the
	// shard the slot came from): the vendor meters them as one, so a 429
	// or a low remaining count empties them all.
	Siblings []limiter.Bucket
	// Signals, if set, say how this vendor throttles; otherwise the
	// client's WithSignals lookup, or DefaultSignals.
	Signals *Signals
	// Reserve is the part of the meter's burst that Bucket leaves to
	// urgent pushes (a normal push on a meter with an urgent_reserve,
	// whose Bucket's burst is the normal share). A throttle or a drain
	// empties the meter's whole burst: the vendor said nothing is left,
	// urgent tokens included.
	Reserve int
	// Horizon, if positive, is the furthest ahead a retry books (a normal
	// push's, whose share must never run ahead of now by more than its
	// burst): a retry whose token lies further sleeps until it is near
	// and asks again, within the push's budget.
	Horizon time.Duration
	// Tokens is what one attempt costs in the bucket (0 counts as 1): on
	// an endpoint metered by items, the items the body carries times
	// their weight. The vendor meters every attempt, so a retry resends,
	// and pays for, the whole body again.
	Tokens int
	// Quota, if set, is the endpoint's calendar quota: every attempt
	// after the first takes one unit of it with its tokens, in one
	// transaction (QuotaTaker), since the vendor counts retries too. A
	// retry it denies sleeps until the token or the reset if that is
	// within the push's budget, and is deferred otherwise.
	Quota *limiter.QuotaBucket
	// Method is the HTTP method; "" is POST. Header may set the
	// Content-Type (JSON when it does not).
	Method string
	// Lease is the in-flight lease the push runs under (a route with
	// max_in_flight), for a Pusher that names it to the vendor or in its
	// logs; the client itself does not send it.
	Lease *limiter.Lease
	// AtVendor, if set, is called as each attempt is sent, and the
	// function it returns once that attempt's answer is read (throttled:
	// the vendor throttled it): the dispatcher counts a bucket's requests
	// at the vendor with it, to learn a concurrency cap the vendor names
	// only in its 429s.
	AtVendor func() (answered func(throttled bool))
	// Judge, if set, reads each answer in the request's message format:
	// a vendor that answers 200 with an error in its body refused the
	// request, whatever the status says. Without it, the status decides.
	Judge Judge
}

// Judge reads a vendor's answer (its status, headers and the start of its
// body) in the request's message format.
type Judge func(status int, header http.Header, body []byte) Judgement

// Judgement is how a message format reads an answer; the zero Judgement
// is an accepted request.
type Judgement struct {
	// Refused: the vendor will not apply the request as sent (Push
	// returns a *PermanentError carrying Status, Reason and Detail).
	Refused bool
	// Throttled: over the vendor's limit; the throttle path, as a 429.
	Throttled bool
	// Transient: the vendor failed; retried with backoff, as a 5xx.
	Transient bool
	// Reason is the vendor's error text (Refused, Transient).
	Reason string
	// RetryAfter is the vendor's wait (Throttled); 0: its Retry-After
	// header, or the policy's default.
	RetryAfter time.Duration
	// Warnings are an accepted request's warnings (Response.Warnings).
	Warnings []string
	// Detail is the format's own reading (for instance the items the
	// vendor named as refused), handed back on PermanentError.Detail.
	Detail any
	// Scope is what a refusal is about (PermanentError.Scope); unstated,
	// the status decides.
	Scope Scope
}

// meter is the bucket as the vendor meters it: Bucket with the urgent
// reserve it leaves out (Reserve) back in its burst.
func (req Request) meter() limiter.Bucket {
	b := req.Bucket
	b.Limit.Burst += req.Reserve
	return b
}

// Response is what a push came to; Push returns it with its error too.
type Response struct {
	Status   int // the last status received (0 if none)
	Attempts int // requests sent
	// Throttled is how many of them the vendor answered with a throttle
	// status (429, or one of the endpoint's Signals.Statuses), or a
	// throttle its Judge read in the body.
	Throttled int
	// Warnings are the vendor's warnings on the accepted request (Judge).
	Warnings []string
}
