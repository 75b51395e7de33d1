package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// The adversary's parts about the OTAs' own formats (ota_formats.go), a
// Secrets Manager outage and a vendor that hangs past the lease. They
// follow the catalogue's own parts, so a case draws those as before.
func init() { catalogue = append(catalogue, formatParts...) }

var xmlFormats = []string{"expedia-ar", "opentravel"}

// wired is a channel that speaks an XML format, for a part about one: an
// XML channel the case has, else one the part gives a format (drawn from
// its own stream). The spec is copied, so that the case before the part
// keeps its own.
func wired(b *build, r *rand.Rand) (*ChannelSpec, *WireSpec) {
	c, w, _ := wiredIf(b, r, func(*ChannelSpec) bool { return true })
	return c, w
}

// wiredIf is wired among the channels ok accepts; false if there is none.
func wiredIf(b *build, r *rand.Rand, ok func(*ChannelSpec) bool) (*ChannelSpec, *WireSpec, bool) {
	var xml, all []int
	for i := range b.sc.Channels {
		if c := &b.sc.Channels[i]; ok(c) {
			all = append(all, i)
			if c.Vendor.Wire.speaks() {
				xml = append(xml, i)
			}
		}
	}
	format := oneOf(r, xmlFormats...)
	if len(all) == 0 {
		return nil, nil, false
	}
	ch := all[r.IntN(len(all))]
	if len(xml) > 0 {
		ch = xml[r.IntN(len(xml))]
	}
	c := &b.sc.Channels[ch]
	w := WireSpec{Format: format, drew: true}
	if c.Vendor.Wire != nil {
		w = *c.Vendor.Wire
		w.drew = false
	}
	c.Vendor.Wire = &w
	return c, &w, true
}

// valid is a part's skip reason when the case's config is invalid with it.
func valid(b *build) string {
	if _, err := config.Parse([]byte(connections(b.sc))); err != nil {
		return firstLine(err.Error())
	}
	return ""
}

// span is a stretch of the load: from a drawn second of it, one of lens.
func span(b *build, r *rand.Rand, lens ...time.Duration) [2]time.Duration {
	from := time.Duration(r.IntN(int(b.sc.Load.Duration/time.Second))) * time.Second
	return [2]time.Duration{from, from + oneOf(r, lens...)}
}

var formatParts = []part{
	{"format", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		// Each channel draws its format; at least one speaks XML.
		var facets []string
		any := false
		for i := range b.sc.Channels {
			c := &b.sc.Channels[i]
			f := oneOf(r, "json", "expedia-ar", "opentravel")
			if i == len(b.sc.Channels)-1 && !any && f == "json" {
				f = oneOf(r, xmlFormats...)
			}
			facets = append(facets, "format="+f)
			if f == "json" {
				continue
			}
			any = true
			c.Vendor.Wire = &WireSpec{Format: f}
		}
		return facets, valid(b)
	}},
	{"refuse-item", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		// Isolating each refused change costs up to 2·⌈log₂ n⌉ requests:
		// a calendar quota sized for the load (the quota part) cannot pay
		// for that within the drain, which would prove nothing lost.
		_, w, ok := wiredIf(b, r, func(c *ChannelSpec) bool { return c.Vendor.Quota == nil })
		if !ok {
			return nil, "every channel has a calendar quota, sized for the load, not for isolating refused changes"
		}
		w.Unmapped = &[2]int32{int32(r.IntN(b.sc.Properties)), int32(r.IntN(b.sc.Load.Rooms))}
		scope := "message"
		if w.Format == "opentravel" {
			if w.UnnamedParts = oneOf(r, false, true); !w.UnnamedParts {
				scope = "item"
			}
		}
		return nonEmpty(w.facet(), "vendor.refuse="+scope), valid(b)
	}},
	{"refuse-credential", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		_, w := wired(b, r)
		w.BadLogin = span(b, r, 10*time.Second, time.Minute, 3*time.Minute)
		return nonEmpty(w.facet(), "vendor.refuse=credential"), valid(b)
	}},
	{"refuse-hotel", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		_, w := wired(b, r)
		w.HotelDenied, w.HotelProp = span(b, r, 10*time.Second, time.Minute, 3*time.Minute), int32(r.IntN(b.sc.Properties))
		how := "403"
		if w.Format == "opentravel" {
			if w.HotelCode392 = oneOf(r, false, true); w.HotelCode392 {
				how = "200-392"
			} else {
				how = "200-497"
			}
		}
		return nonEmpty(w.facet(), "vendor.refuse=hotel", "vendor.refuse_hotel="+how), valid(b)
	}},
	{"malformed-xml", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		_, w := wired(b, r)
		w.Malformed = oneOf(r, 0.02, 0.1)
		return nonEmpty(w.facet(), fmt.Sprintf("vendor.malformed_xml=%g", w.Malformed)), valid(b)
	}},
	{"hang-lease", "vendor", func(b *build, r *rand.Rand) ([]string, string) {
		// A vendor that answers nothing for a while on an endpoint whose
		// requests hold a lease: each push runs out of its time.
		c := b.channel(r)
		n := 1 + r.IntN(3)
		hold := oneOf(r, "25s", "60s")
		setKey(c, "max_in_flight", fmt.Sprint(n))
		setKey(c, "lease_hold", fmt.Sprintf("%q", hold))
		c.Vendor.MaxInFlight = n
		// Half an hour outlasts a change sent again maxResends times
		// (syncer.Retry's backoff: 10 s, 20 s, 40 s, then a minute each).
		c.Vendor.HangSpan = span(b, r, 30*time.Second, 2*time.Minute, 30*time.Minute)
		// Half an hour of deferrals over 50–64 connections a property
		// costs the simulation half a minute of CPU a case (seeds 19, 29):
		// there the silence lasts ten minutes.
		if h := &c.Vendor.HangSpan; c.Connections > 8 && h[1]-h[0] > 10*time.Minute {
			h[1] = h[0] + 10*time.Minute
		}
		return []string{fmt.Sprintf("max_in_flight=%d", n), "lease_hold=" + hold, fmt.Sprintf("vendor.hang_span=%v", c.Vendor.HangSpan[1]-c.Vendor.HangSpan[0])}, valid(b)
	}},
	{"secrets-outage", "fault", func(b *build, r *rand.Rand) ([]string, string) {
		b.sc.Faults.SecretsOutage = span(b, r, 30*time.Second, 2*time.Minute, 10*time.Minute)
		return []string{"fault.secrets_outage"}, valid(b)
	}},
}

// facet is the format a part drew for its channel ("" if the channel
// already spoke one), for the coverage table.
func (w *WireSpec) facet() string {
	if !w.drew {
		return ""
	}
	return "format=" + w.Format
}

func nonEmpty(fs ...string) []string {
	out := fs[:0]
	for _, f := range fs {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}
