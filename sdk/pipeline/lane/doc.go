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
// invocation with no claim), Claim at a later push's slot, Finish after it,
// or FinishAll for the lanes of one item pushed together. Due and Sweep
// recover lanes whose owner died. The protocol is in protocol.go and
// docs/design.md ("The pipeline").
//
// The lanes of one property and kind share one item (key), each lane's
// attributes named by its suffix (attr); lane.go reads that item back
// (pendingOf) and holds Mark and Claim, element.go an element's form in
// the item's string sets, finish.go Finish and FinishAll (one write's
// expressions for any number of lanes), lease.go the writes of an
// owner's lease.
package lane
