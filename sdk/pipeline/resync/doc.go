// Package resync pushes a property's stored ARI state again, below live
// changes: the bulk class (docs/design.md, "Resync: the bulk class").
//
// A resync carries no values. It reads which cells and dates the state
// table holds for its window and makes the lanes pending with them as bulk
// elements (lane.Element.Bulk); every push reads the state at push time,
// so the newest state goes out whichever class carries a date. Cells the
// store holds nothing for are reported, never invented.
//
// Begin with Send: it is how `fleetbucket resync`, a connection
// enabled or remapped, and a repair that can wait reach the changes queue (an
// ari.Resync event), which the sync function's syncer plans (PlanKind) and
// marks (syncer.Syncer.Resync). ProgressOf reads how much of it is still
// pending.
package resync
