package otapush

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Signals says how a vendor shows throttling: which statuses mean
// "throttled" and which headers report what is left of its limit and the
// limit itself. Vendors differ: most answer 429, Hotelbeds 403; Expedia
// Rapid reports what is left as a percentage, Expedia XAP with its own
// EG-Rate-Limit-* names, newer APIs with the IETF RateLimit fields.
type Signals struct {
	// Statuses are the HTTP statuses that mean throttled: the push is
	// retried after Retry-After and the fleet's bucket throttled (emptied,
	// and an adaptive one slowed). Default [429].
	Statuses []int
	// Headers are the header families read on every answer.
	Headers []HeaderSpec
	// LowRemaining drains the bucket when a count of requests left is
	// below it (0 turns counts off).
	LowRemaining int
	// LowPercent drains the bucket when a percentage left is below it (0
	// turns percentages off).
	LowPercent float64
}

// HeaderSpec is one family of rate-limit headers: a Preset, or the names
// of a vendor's own headers.
type HeaderSpec struct {
	// Preset names a known family; the fields below are then ignored but
	// for Window with PresetXRateLimit:
	//   - PresetIETF: the structured fields RateLimit ("default";r=40;t=30:
	//     r left) and RateLimit-Policy ("default";q=100;w=60: a quota q per
	//     w seconds), IETF draft-ietf-httpapi-ratelimit-headers-11. With
	//     several request policies the one with the shortest window is the
	//     bucket's limit; longer windows belong in the endpoint's "limits".
	//     A policy in concurrent-requests (qu) is Reading.Concurrency, one
	//     in content-bytes Reading.BytesRate; pk is Reading.PartitionKey.
	//   - PresetXRateLimit: X-RateLimit-Remaining and its common spellings
	//     (a count); X-RateLimit-Limit is a quota per Window, read only when
	//     Window is set, since the family does not say its window.
	//   - PresetEG: Expedia XAP's EG-Rate-Limit-Remaining-Minute (a count)
	//     and EG-Rate-Limit-Minute (a quota per minute).
	//   - PresetExpediaRapid: Expedia Rapid's Rate-Limit-Minute-Remaining,
	//     a percentage.
	Preset string
	// Remaining is the header holding what is left, in Unit.
	Remaining string
	// Unit is UnitCount (default) or UnitPercent.
	Unit string
	// Limit is the header holding the quota per Window.
	Limit string
	// Window is the quota's window; required with Limit.
	Window time.Duration
}

// Header presets and units.
const (
	PresetIETF         = "ietf"
	PresetXRateLimit   = "x-ratelimit"
	PresetEG           = "eg-rate-limit"
	PresetExpediaRapid = "expedia-rapid"
	UnitCount          = "count"
	UnitPercent        = "percent"
)

// DefaultSignals are used for a bucket with no signals of its own: 429,
// the IETF fields and X-RateLimit-Remaining, drained below 1 request left
// or 5% left.
var DefaultSignals = Signals{
	Statuses:     []int{http.StatusTooManyRequests},
	Headers:      []HeaderSpec{{Preset: PresetIETF}, {Preset: PresetXRateLimit}},
	LowRemaining: 1,
	LowPercent:   5,
}

// Validate names the first field that is wrong, so that a bad config stops
// the function at start-up.
func (s Signals) Validate() error {
	if len(s.Statuses) == 0 {
		return errors.New("statuses: none, want at least one (429 for most vendors)")
	}
	for _, st := range s.Statuses {
		if st != http.StatusTooManyRequests && (st < 400 || st > 599 || st == http.StatusUnauthorized) {
			return fmt.Errorf("statuses: %d, want 429 or another 4xx/5xx the vendor throttles with (not 401, which means a bad credential)", st)
		}
	}
	if s.LowRemaining < 0 {
		return fmt.Errorf("low_remaining: %d, want ≥ 0", s.LowRemaining)
	}
	if math.IsNaN(s.LowPercent) || s.LowPercent < 0 || s.LowPercent >= 100 {
		return fmt.Errorf("low_percent: %v, want 0 to below 100", s.LowPercent)
	}
	for i, h := range s.Headers {
		if err := h.validate(); err != nil {
			return fmt.Errorf("headers[%d]: %w", i, err)
		}
	}
	return nil
}

func (h HeaderSpec) validate() error {
	switch h.Preset {
	case PresetIETF, PresetEG, PresetExpediaRapid:
		if h.Remaining != "" || h.Limit != "" || h.Unit != "" || h.Window != 0 {
			return fmt.Errorf("preset %q takes no other field", h.Preset)
		}
		return nil
	case PresetXRateLimit:
		if h.Remaining != "" || h.Limit != "" || h.Unit != "" || h.Window < 0 {
			return fmt.Errorf("preset %q takes only window_seconds (the window of X-RateLimit-Limit)", h.Preset)
		}
		return nil
	case "":
	default:
		return fmt.Errorf("preset %q, want %s, %s, %s or %s", h.Preset, PresetIETF, PresetXRateLimit, PresetEG, PresetExpediaRapid)
	}
	switch {
	case h.Remaining == "" && h.Limit == "":
		return errors.New("neither a preset nor a remaining or limit header")
	case h.Remaining != "" && !validHeaderName(h.Remaining):
		return fmt.Errorf("remaining: %q is not a header name", h.Remaining)
	case h.Limit != "" && !validHeaderName(h.Limit):
		return fmt.Errorf("limit: %q is not a header name", h.Limit)
	case h.Unit != "" && h.Unit != UnitCount && h.Unit != UnitPercent:
		return fmt.Errorf("unit: %q, want %q (default) or %q", h.Unit, UnitCount, UnitPercent)
	case h.Limit != "" && h.Window <= 0:
		return fmt.Errorf("limit %q needs window_seconds > 0: a quota means nothing without its window", h.Limit)
	case h.Limit == "" && h.Window != 0:
		return errors.New("window_seconds without a limit header")
	case h.Unit == UnitPercent && h.Remaining == "":
		return errors.New("unit percent without a remaining header")
	}
	return nil
}

func validHeaderName(s string) bool {
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return s != ""
}

// Throttles reports whether status means throttled.
func (s Signals) Throttles(status int) bool {
	for _, st := range s.Statuses {
		if st == status {
			return true
		}
	}
	return false
}

// Reading is what an answer's headers said, the tightest of each kind over
// every family read.
type Reading struct {
	// Remaining is the fewest requests left, when HasRemaining.
	Remaining    int
	HasRemaining bool
	// Percent is the smallest percentage left, when HasPercent.
	Percent    float64
	HasPercent bool
	// Rate is the lowest published limit in requests per second; 0 if
	// none was published.
	Rate float64

	// The IETF draft-11 fields beyond a request rate. None of them changes
	// what Low or a Client does; the pipeline acts on them. (A policy in
	// content-bytes or concurrent-requests is not read as a request rate,
	// nor what is left of it as requests left.)

	// Concurrency is the lowest quota of a RateLimit-Policy in
	// concurrent-requests (qu), the vendor's max_in_flight; 0 if none.
	Concurrency int
	// BytesRate is the lowest content-bytes quota per second (qu
	// content-bytes with a window); 0 if none. It never lowers Rate.
	BytesRate float64
	// Reset is the effective window (t) of the RateLimit item with the
	// fewest requests left, when HasReset. Retry-After, where sent, takes
	// precedence over it (Pause).
	Reset    time.Duration
	HasReset bool
	// PartitionKey is the pk the vendor sent (decoded from its byte
	// sequence), first from RateLimit, else from RateLimit-Policy: the
	// quota partition it charged. Compare it with the bucket the push used
	// and log a mismatch.
	PartitionKey []byte
	// ReducedCapacity: a 503 whose problem type is temporary reduced
	// capacity (ReadAnswer only), to be treated as a throttle; a lower
	// RateLimit-Policy sent with it is in Rate.
	ReducedCapacity bool
	// Ignored says what was malformed and left out (one line each, to
	// log); a malformed member never fails the read.
	Ignored []string
}

// Low reports whether the reading says to drain the bucket.
func (s Signals) Low(r Reading) bool {
	return r.HasRemaining && s.LowRemaining > 0 && r.Remaining < s.LowRemaining ||
		r.HasPercent && s.LowPercent > 0 && r.Percent < s.LowPercent
}

// Read reads every family of s from h. Values that do not parse are
// ignored: a vendor's malformed header must not stop a push, and the 429s
// still count.
func (s Signals) Read(h http.Header) Reading {
	var r Reading
	count := func(n int) {
		if !r.HasRemaining || n < r.Remaining {
			r.Remaining, r.HasRemaining = n, true
		}
	}
	percent := func(p float64) {
		if !r.HasPercent || p < r.Percent {
			r.Percent, r.HasPercent = p, true
		}
	}
	rate := func(q float64, w time.Duration) {
		if q >= 0 && w > 0 {
			// A quota of 0 leaves no rate to pace at: drain, do not divide.
			if q == 0 {
				count(0)
				return
			}
			if v := q / w.Seconds(); r.Rate == 0 || v < r.Rate {
				r.Rate = v
			}
		}
	}
	for _, spec := range s.Headers {
		switch spec.Preset {
		case PresetIETF:
			readIETF(h, &r, count, rate)
		case PresetXRateLimit:
			if n, ok := remaining(h); ok {
				count(n)
			}
			if spec.Window > 0 {
				if q, ok := number(h.Get("X-RateLimit-Limit")); ok {
					rate(q, spec.Window)
				}
			}
		case PresetEG:
			if n, ok := number(h.Get("EG-Rate-Limit-Remaining-Minute")); ok {
				count(int(n))
			}
			if q, ok := number(h.Get("EG-Rate-Limit-Minute")); ok {
				rate(q, time.Minute)
			}
		case PresetExpediaRapid:
			if p, ok := number(h.Get("Rate-Limit-Minute-Remaining")); ok {
				percent(p)
			}
		default:
			if spec.Remaining != "" {
				if v, ok := number(h.Get(spec.Remaining)); ok {
					if spec.Unit == UnitPercent {
						percent(v)
					} else {
						count(int(v))
					}
				}
			}
			if spec.Limit != "" {
				if q, ok := number(h.Get(spec.Limit)); ok {
					rate(q, spec.Window)
				}
			}
		}
	}
	return r
}

// number reads the first number of a header value: a plain non-negative
// count or percentage, or the first of a "n, n;w=60" list.
func number(v string) (float64, bool) {
	first, _, _ := strings.Cut(v, ",")
	first, _, _ = strings.Cut(first, ";")
	f, err := strconv.ParseFloat(strings.TrimSpace(first), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}
