package config

import (
	"fmt"
	"strings"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// ReadMeter is the meter of a channel's read endpoint: its bucket is
// BucketKey(channel, credential, ReadMeter), apart from every push meter,
// since a vendor meters its retrieval API on its own. No push endpoint may
// name it as its meter.
const ReadMeter = "read"

// ReadEndpoint is a channel's "read": where a parity check reads back what
// the OTA holds of a hotel (sdk/pipeline/parity), and the read's own limit.
// The channel's format must be a format.Reader.
//
//	"read": {"path": "/eqc/parr", "limit": {"rate": 1, "burst": 2}, "max_days": 31}
type ReadEndpoint struct {
	Path  string    `json:"path"`
	Limit LimitSpec `json:"limit"`
	// MaxDays is the window one read asks for; default and most: the
	// format's (format.ReadTraits.MaxDays).
	MaxDays int `json:"max_days,omitempty"`
}

// Read is where and how a parity check reads a channel: the URL, the
// bucket's limit (with the margin an endpoint of that limit keeps), the
// longest window of one read, and the format that reads.
type Read struct {
	URL     string
	Limit   limiter.Limit
	MaxDays int
	Reader  format.Reader
}

// ReadOf returns how the channel is read, or an error saying the channel
// has no "read" (or its format cannot read).
func (c *Config) ReadOf(channel string) (Read, error) {
	ch, ok := c.Channels[channel]
	if !ok {
		return Read{}, fmt.Errorf("unknown channel %q", channel)
	}
	if ch.Read == nil {
		return Read{}, fmt.Errorf("channel %q has no \"read\" endpoint: add channels.%s.read {path, limit} to check its parity", channel, channel)
	}
	r, err := format.ReaderOf(ch.FormatName())
	if err != nil {
		return Read{}, fmt.Errorf("channel %q: %w", channel, err)
	}
	days := r.ReadTraits().MaxDays
	if ch.Read.MaxDays > 0 {
		days = ch.Read.MaxDays
	}
	ep := Endpoint{Limit: ch.Read.Limit}
	return Read{
		URL:     strings.TrimRight(ch.BaseURL, "/") + "/" + strings.TrimLeft(ch.Read.Path, "/"),
		Limit:   ep.withMargin(limiter.Limit{Rate: ch.Read.Limit.Rate, Burst: ch.Read.Limit.Burst}),
		MaxDays: days,
		Reader:  r,
	}, nil
}

// validateRead checks a channel's "read"; at is the channel's place in the
// file.
func validateRead(at string, ch Channel) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, name := range sortedKeys(ch.Endpoints) {
		if ch.MeterOf(name) == ReadMeter {
			add("%s.endpoints.%s.meter: %q is the read endpoint's meter; name the push meter otherwise", at, name, ReadMeter)
		}
	}
	rd := ch.Read
	if rd == nil {
		return errs
	}
	at += ".read"
	r, err := format.ReaderOf(ch.FormatName())
	if err != nil {
		add("%s: %v", at, err)
	}
	if rd.Path == "" {
		add("%s.path: empty", at)
	} else if strings.ContainsAny(rd.Path, "?#") || hasDotSegment(rd.Path) {
		add("%s.path: %q may not hold a query, a fragment or a \".\" / \"..\" segment", at, rd.Path)
	}
	if err := (limiter.Bucket{Key: "k", Limit: limiter.Limit{Rate: rd.Limit.Rate, Burst: rd.Limit.Burst}}).Validate(); err != nil {
		add("%s.limit: %v", at, err)
	}
	if r != nil {
		if most := r.ReadTraits().MaxDays; rd.MaxDays < 0 || rd.MaxDays > most {
			add("%s.max_days: %d, want 1 to %d (format %s's most; 0 or unset: that)", at, rd.MaxDays, most, ch.FormatName())
		}
	}
	return errs
}
