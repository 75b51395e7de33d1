// Package lane keeps, per lane, what is waiting to be pushed and who is
// pushing it, so that a lane has at most one push pending however many
// changes it receives.
//
// A lane is one stream of pushes: a property's changes of one kind
// (availability, rates, restrictions) to one connection of it (channel,
// credential, hotel_ref). A change marks its lanes dirty; the first to find a
// lane without an owner schedules its one push; at its slot the owner claims
// the lane, pushes everything pending, and finishes it or schedules the next.
//
// Begin with a Store (a DynamoDB client and the ARI state table): Mark for a
// change (a lane it took fresh, Mark.Fresh, is pushed by the marking
// invocation with no claim), Claim (or ClaimAfter, from the tokens of
// claims left unanswered too) at a later push's slot, Finish after it, or
// FinishAll for the lanes of one item pushed together. Renew keeps an
// owner's lease through a deferral, and EndLease gives up the lane of a
// job that will never push, keeping what is pending, for Due and Sweep to
// take over (Strand lists a lane for them whoever holds it); a lane whose owner died is taken over by the next Mark once
// its lease runs out. The protocol is in
// protocol.go and docs/design.md ("The pipeline: lanes, not jobs per
// change").
//
// The lanes of one property and kind share one item (key), each lane's
// attributes named by its suffix (attr); lane.go reads that item back
// (pendingOf) and holds Mark and Claim, element.go an element's form in
// the item's string sets, finish.go Finish and FinishAll (one write's
// expressions for any number of lanes), lease.go the writes of an owner's
// lease, sweep.go the sparse sweep index (Due, Sweep), compact.go the
// coalescing of a long backlog (Coalesce, Compact), expr.go DynamoDB's
// bounds on one expression, and read.go an operator's Read.
package lane
