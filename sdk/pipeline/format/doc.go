// Package format speaks each OTA's own message: it turns a lane's pending
// work into the HTTP requests a vendor takes, and the vendor's answer into
// one of five outcomes (accepted, accepted with warnings, refused with the
// items the vendor named, throttled, transient failure).
//
// Begin with Encode: look a format up by the name the connections config
// gives a channel (Lookup("opentravel")), describe the work (a hotel, a
// kind, cells of room type × rate plan with their dates' values, and the
// credential's Secret) and the endpoint's Shape; Encode returns the
// requests, each to send with its own tokens. Give each answer to the
// format's Decode, and a refused one whose scope is its items or the
// message (Outcome.Scope) to PlanFor, which isolates the refused change so
// that every other change still reaches the vendor; a refusal of the
// credential or the hotel is about no change, and is never taken apart.
//
// A format may also be a Reader, which reads back what the OTA holds of a
// hotel (ReaderOf): "expedia-ar" reads with Expedia's Products,
// Availability and Rates Retrieval (ProductAvailRateRetrievalRQ); the
// others cannot read. sdk/pipeline/parity compares what it reads with the
// stored state.
//
// Built in: "json" (fleetbucket's own body), "opentravel"
// (OTA_HotelAvailNotifRQ / OTA_HotelRateAmountNotifRQ, as Booking.com's
// B.XML) and "expedia-ar" (Expedia's AvailRateUpdateRQ). A program adds its
// own with Register before it loads the config. Values follow the
// vocabulary of Values; a value a format cannot carry is an
// *UnexpressibleError, never a silent change.
package format
