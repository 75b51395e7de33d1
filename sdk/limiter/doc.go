// Package limiter is a token bucket shared by a whole fleet of processes,
// kept in DynamoDB and changed only by atomic conditional writes: one write
// per granted token.
//
// A Limiter grants tokens from buckets identified by a key, typically one per
// (API credential, endpoint) of a vendor that meters requests. Every process
// that uses the same table and key draws from the same allowance, so ten
// workers together stay under the vendor's limit instead of each pacing
// itself to it. The Limit travels with every call, so a changed limit takes
// effect on the next call with nothing to migrate.
//
// There are three ways to consume tokens:
//   - Take grants tokens now or reports, as an *ExhaustedError, exactly how
//     long until it would.
//   - Reserve books a slot up to a max delay ahead; the caller owns the
//     tokens from Reservation.Slot on, without booking again. Use it to
//     defer work (onto a queue, with that delay). A slot booked
//     SilenceAfter or more ahead asks Silence before it is spent, and
//     Confirm on an adaptive bucket (Reserve's doc says why).
//   - Wait reserves and sleeps until the slot, failing at once when the slot
//     lies past its max wait or the context's deadline.
//
// Most workers that push to a vendor want Reserve (or Wait): it costs one
// write per granted token even when the bucket is saturated, where
// take-and-retry costs a write per attempt. ReserveBatch books many slots in
// one write; TakeMulti and ReserveMulti take from several buckets in one
// transaction; TakeSharded spreads a hot bucket over several items.
// Penalize empties a bucket for the fleet until a vendor's Retry-After;
// adaptive buckets (Bucket.Adaptive, Throttle, Publish, Confirm) learn a
// vendor's real limit; AcquireLease caps requests in flight, and
// LowerInFlight and InFlightCap learn a cap a vendor names only in its
// 429s (inflight_cap.go); TakeQuota
// meters calendar quotas. Limit.Margin keeps part of the burst free for
// requests that reach the vendor later than their slots, and Wait never
// hands back a grant later than that (Late): it books again.
//
// Begin with New and a DynamoDB client (any DynamoDBAPI), and CreateTable
// for a local table. Errors match ErrExhausted, ErrContended (retry at
// once: no decision, not a denial), ErrUnavailable (fail closed) and the
// others with errors.Is. The guarantees — burst + rate·W over any window W
// for any number of workers, at most two writes per call, clock skew,
// lost answers, resets — and their derivations are in the repository's
// docs/design.md. For unit tests without DynamoDB, package limitertest has
// an in-memory limiter with the same calls on a clock the test moves.
package limiter
