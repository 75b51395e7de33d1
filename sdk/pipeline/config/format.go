package config

import (
	"fmt"
	"strings"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// FormatName is the channel's message format: its "format", or "json".
func (ch Channel) FormatName() string {
	if ch.Format == "" {
		return format.JSON
	}
	return ch.Format
}

// MessageFormat is the channel's registered format.
func (ch Channel) MessageFormat() (format.Format, error) {
	f, ok := format.Lookup(ch.FormatName())
	if !ok {
		return nil, fmt.Errorf("format %q is not registered, want one of %s (a Go program may format.Register its own before loading the config)",
			ch.FormatName(), strings.Join(format.Names(), ", "))
	}
	return f, nil
}

// Shape is what one request to the endpoint may hold, for format.Encode:
// max_items and max_bytes (defaults applied), split_by and
// kinds_per_message.
func (e Endpoint) Shape() format.Shape {
	maxItems, maxBytes := e.RequestLimits()
	return format.Shape{MaxItems: maxItems, MaxBytes: maxBytes, SplitBy: e.SplitBy, KindsPerMessage: max(e.KindsPerMessage, 1)}
}

// Encoding is what a push to the channel's endpoint is encoded with: the
// channel's registered format and the endpoint's shape, read together so
// that a job's route resolves both once and its push reads neither again.
func (ch Channel) Encoding(endpoint string) (format.Format, format.Shape, error) {
	f, err := ch.MessageFormat()
	if err != nil {
		return nil, format.Shape{}, err
	}
	return f, ch.Endpoints[endpoint].Shape(), nil
}

// validateFormat checks a channel's format and its endpoints' shaping keys;
// at is the channel's place in the file.
func validateFormat(at string, ch Channel) []error {
	var errs []error
	f, err := ch.MessageFormat()
	if err != nil {
		errs = append(errs, fmt.Errorf("%s.format: %v", at, err))
	}
	for _, name := range sortedKeys(ch.Endpoints) {
		ep := ch.Endpoints[name]
		if s := ep.SplitBy; s != "" && s != format.SplitMonth && s != format.SplitNone {
			errs = append(errs, fmt.Errorf("%s.endpoints.%s.split_by: %q, want %q or %q (default: the format's own)", at, name, s, format.SplitMonth, format.SplitNone))
		}
		// A format whose vendors take one calendar month per request
		// (Booking.com's OpenTravel) refuses every message that crosses
		// a month, and a change crossing one alone too: each would be
		// dead-lettered, so the file is refused instead.
		if f != nil && f.Traits().SplitBy == format.SplitMonth && ep.SplitBy == format.SplitNone {
			errs = append(errs, fmt.Errorf("%s.endpoints.%s.split_by: %q, but format %q takes one calendar month per request: every change crossing a month would be refused; drop split_by or set %q", at, name, ep.SplitBy, ch.FormatName(), format.SplitMonth))
		}
		if k := ep.KindsPerMessage; k < 0 || k > len(Kinds) {
			errs = append(errs, fmt.Errorf("%s.endpoints.%s.kinds_per_message: %d, want 1 (the default) to %d", at, name, k, len(Kinds)))
		}
	}
	return errs
}
