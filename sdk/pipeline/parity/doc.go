// Package parity checks that an OTA holds what fleetbucket stored for a
// hotel, and repairs what drifted: a hotelier editing the OTA's extranet
// by hand, a push lost to an outage, a mapping fixed after the fact.
//
// Begin with Checker.Run: it reads what the OTA holds of one connection
// over a window (through the channel's "read" endpoint, a bucket of its
// own, with a format.Reader), reads the stored state of the same cells
// (sdk/pipeline/ari), compares them (Compare, a pure function), counts the
// drift in an EMF line and a Report, and hands every drifted date to a
// Repairer, which marks its lane with the stored state so that the normal
// push path sends the newest values. QueueRepairer does that through the
// changes queue, the mark path every PMS change takes (the CLI's parity
// command); SyncerRepairer marks in the running invocation, as a change
// batch does (the sync function's parity event).
package parity
