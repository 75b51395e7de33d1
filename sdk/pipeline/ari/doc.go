// Package ari is the availability, rates and inventory (ARI) side of the
// channel manager: the PMS change event, and the state it is written into.
//
// Events are applied to state keyed by (property, kind, room type, rate plan,
// date), each cell guarded by the per-property sequence, so an event
// delivered late or twice can never regress a cell. Pushes then read the
// state at push time: a late push sends the newest values, not the ones of
// the event that triggered it.
//
// Begin with Parse for an event's body, and a Store (a DynamoDB client and a
// table made by CreateTable) to Apply it and Read the state back.
package ari
