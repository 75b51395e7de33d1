// Package connections keeps a channel manager's connections as data: which
// OTAs each property is connected to (per channel: the credential, the
// hotel's id there, enabled or not, the kinds of change it receives and
// its code mappings), in a DynamoDB table, so that connecting a hotel is a
// write, not a deploy.
//
// Begin with Store: Put writes one connection, conditional on the version
// it read (a *VersionError otherwise), after checking it with the same
// rules as the connections file (config.Config.ValidateConnections);
// Import loads many with BatchWriteItem. The sync function reads through a
// Cache, whose entries live at most MaxAge (DefaultMaxAge, 60 s): a
// connection written through the CLI receives pushes within that bound.
// The connections file keeps what is about vendors (channels, endpoints,
// limits, formats, credentials).
package connections
