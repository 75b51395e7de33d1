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

// maxDelaySeconds is the largest delta-seconds a time.Duration holds.
const maxDelaySeconds = int64(math.MaxInt64 / time.Second)

// ParseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): either
// delta-seconds or an HTTP-date. A date in the past means "now" (0). It
// returns an error for an empty, negative or unparsable value; the caller
// picks a default.
//
// A value too large for a time.Duration (delta-seconds beyond about 292
// years, however many digits, or a date as far ahead) is not an error: it
// saturates at the largest Duration, so that a caller's cap (the Client's
// Policy.MaxRetryAfter) clamps it like any other long wait, as RFC 9111
// §1.2.2 asks of delta-seconds too large to represent.
func ParseRetryAfter(v string, now time.Time) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, errors.New("no Retry-After")
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > maxDelaySeconds {
			// Only digits, so the one way to fail is being too large.
			return time.Duration(math.MaxInt64), nil
		}
		return time.Duration(secs) * time.Second, nil
	}
	if strings.HasPrefix(v, "-") {
		return 0, fmt.Errorf("negative Retry-After %q", v)
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, fmt.Errorf("unparsable Retry-After %q", v)
	}
	return max(at.Sub(now), 0), nil
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// remainingHeaders are the spellings vendors use for "requests left in the
// current window", most common first.
var remainingHeaders = []string{"X-RateLimit-Remaining", "X-Rate-Limit-Remaining", "RateLimit-Remaining", "X-RateLimit-Requests-Remaining"}

// remaining returns the vendor's count of requests left, if it sent one.
func remaining(h http.Header) (int, bool) {
	for _, name := range remainingHeaders {
		if v := h.Get(name); v != "" {
			// Some vendors send "n, n;w=60" lists; the first number is the tightest.
			first, _, _ := strings.Cut(v, ",")
			if n, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && n >= 0 {
				return n, true
			}
		}
	}
	return 0, false
}
