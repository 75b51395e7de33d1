// Package config is the channel manager's map of who pushes where: for each
// property, the channels (OTAs) it is connected to and with which
// credential; for each channel, its endpoints and the limit the OTA meters
// each (credential, endpoint) by.
//
// Begin with Load (or Parse): the file ships with the deployment
// (config/connections.example.json is the documented example) and is
// validated in full, so a function with a bad config refuses to start
// rather than push under wrong limits. BucketKey names the shared bucket of
// a (channel, credential, meter).
package config
