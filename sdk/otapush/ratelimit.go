package otapush

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The IETF RateLimit fields, draft-ietf-httpapi-ratelimit-headers-11.
//
// RateLimit-Policy is a list of quota policies: "name";q=<quota>;w=<window
// seconds>;qu=<unit>;pk=:<partition key>:. RateLimit is a list of service
// limits: "name";r=<remaining>;t=<effective window seconds>;pk=:…:. Both may
// be split over several lines. The unit is "requests" by default,
// "content-bytes" or "concurrent-requests". Malformed members must be
// ignored (draft §7): a member that does not parse is skipped with a line
// in Reading.Ignored, never an error.

// Quota units (draft-11 §3.1.2).
const (
	unitRequests   = "requests"
	unitBytes      = "content-bytes"
	unitConcurrent = "concurrent-requests"
)

// ReducedCapacityType is the problem type of a 503 that announces a
// temporary reduction in the vendor's capacity (draft-11 §5.2).
const ReducedCapacityType = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"

// sfMember is one member of a structured-field list (RFC 9651): its value
// (the policy name) and its parameters, each kept as its raw bare item.
type sfMember struct {
	name   string
	params map[string]string
}

// sfList splits a structured-field list into members. It understands what
// the rate-limit fields use (string or token members; integer, string,
// token and byte-sequence parameters) and skips a member it cannot read,
// saying why in ignored.
func sfList(field string, values []string, ignored *[]string) []sfMember {
	var out []sfMember
	for _, v := range values {
		for _, raw := range splitOutsideQuotes(v, ',') {
			raw = strings.TrimSpace(raw)
			if raw == "" {
				continue
			}
			m, err := sfParseMember(raw)
			if err != nil {
				*ignored = append(*ignored, fmt.Sprintf("%s member %q: %v", field, clip(raw), err))
				continue
			}
			out = append(out, m)
		}
	}
	return out
}

func sfParseMember(raw string) (sfMember, error) {
	parts := splitOutsideQuotes(raw, ';')
	name := strings.TrimSpace(parts[0])
	switch {
	case name == "":
		return sfMember{}, fmt.Errorf("no policy name")
	case strings.HasPrefix(name, `"`):
		s, ok := sfString(name)
		if !ok {
			return sfMember{}, fmt.Errorf("bad quoted name")
		}
		name = s
	case !sfToken(name):
		return sfMember{}, fmt.Errorf("name is neither a string nor a token")
	}
	m := sfMember{name: name, params: map[string]string{}}
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		if !sfKey(k) {
			return sfMember{}, fmt.Errorf("bad parameter key %q", clip(k))
		}
		m.params[k] = strings.TrimSpace(val) // the last of a repeated key wins (RFC 9651 §4.2.3.2)
	}
	return m, nil
}

// splitOutsideQuotes splits s at sep where sep is not inside a quoted
// string (a policy name may hold a comma or a semicolon).
func splitOutsideQuotes(s string, sep byte) []string {
	var (
		out    []string
		quoted bool
		start  int
	)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// sfKey: lcalpha or "*", then lcalpha, digits, "_", "-", ".", "*".
func sfKey(k string) bool {
	for i, c := range k {
		if !(c >= 'a' && c <= 'z' || c == '*' || i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.')) {
			return false
		}
	}
	return k != ""
}

func sfToken(s string) bool {
	for i, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*' ||
			i > 0 && (c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'+-.^_`|~:/", c))) {
			return false
		}
	}
	return s != ""
}

// sfString reads a quoted string: "…" with \\ and \" escapes.
func sfString(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		c := s[i]
		if c == '\\' {
			if i++; i == len(s)-1 || s[i] != '"' && s[i] != '\\' {
				return "", false
			}
			c = s[i]
		} else if c == '"' || c < 0x20 || c > 0x7e {
			return "", false
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// sfInt reads a non-negative Integer (at most 15 digits, RFC 9651 §3.3.1).
func sfInt(m sfMember, key string) (int64, bool, error) {
	v, ok := m.params[key]
	if !ok {
		return 0, false, nil
	}
	if len(v) == 0 || len(v) > 15 || !isDigits(v) {
		return 0, false, fmt.Errorf("%s=%q is not a non-negative integer", key, clip(v))
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil, err
}

// sfWord reads a String parameter, or a token where a vendor sent one.
func sfWord(m sfMember, key string) (string, bool) {
	v, ok := m.params[key]
	if !ok {
		return "", false
	}
	if s, ok := sfString(v); ok {
		return s, true
	}
	return v, sfToken(v)
}

// sfBytes reads a Byte Sequence parameter: :base64:.
func sfBytes(m sfMember, key string) ([]byte, bool, error) {
	v, ok := m.params[key]
	if !ok {
		return nil, false, nil
	}
	if len(v) < 2 || v[0] != ':' || v[len(v)-1] != ':' {
		return nil, false, fmt.Errorf("%s=%q is not a byte sequence (:base64:)", key, clip(v))
	}
	b, err := base64.StdEncoding.DecodeString(v[1 : len(v)-1])
	if err != nil {
		return nil, false, fmt.Errorf("%s=%q: %v", key, clip(v), err)
	}
	return b, true, nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// policy is one RateLimit-Policy member, read.
type policy struct {
	q      int64
	w      int64 // 0: no window
	unit   string
	pk     []byte
	hasPK  bool
	member string
}

const maxWindow = 366 * 24 * 3600

// readIETF reads RateLimit-Policy and RateLimit into r: the request policy
// with the shortest window through rate, concurrency and bytes apart, the fewest
// requests left through count (for the service limits of request
// policies, or of policies not sent), and their t and pk.
func readIETF(h http.Header, r *Reading, count func(int), rate func(float64, time.Duration)) {
	units := map[string]string{}
	var (
		shortest policy
		found    bool
	)
	for _, m := range sfList("RateLimit-Policy", h.Values("RateLimit-Policy"), &r.Ignored) {
		p, err := readPolicy(m)
		if err != nil {
			r.Ignored = append(r.Ignored, fmt.Sprintf("RateLimit-Policy %q: %v", clip(m.name), err))
			continue
		}
		units[m.name] = p.unit
		if p.hasPK && r.PartitionKey == nil {
			r.PartitionKey = p.pk
		}
		switch {
		case p.unit == unitConcurrent:
			if c := int(min(p.q, math.MaxInt32)); r.Concurrency == 0 || c < r.Concurrency {
				r.Concurrency = c
			}
		case p.w == 0:
			// A quota with no window is no rate.
		case p.unit == unitBytes:
			if v := float64(p.q) / float64(p.w); r.BytesRate == 0 || v < r.BytesRate {
				r.BytesRate = v
			}
		case !found || p.w < shortest.w || p.w == shortest.w && p.q < shortest.q:
			// With several request policies the shortest window is the
			// bucket's limit; longer ones belong in the endpoint's limits.
			shortest, found = p, true
		}
	}
	if found {
		rate(float64(shortest.q), time.Duration(shortest.w)*time.Second)
	}
	var pk []byte
	fewest := int64(-1)
	for _, m := range sfList("RateLimit", h.Values("RateLimit"), &r.Ignored) {
		left, ok, err := sfInt(m, "r")
		if err == nil && !ok {
			err = fmt.Errorf("no r (the available quota is required)")
		}
		t, hasT, terr := sfInt(m, "t")
		b, hasPK, perr := sfBytes(m, "pk")
		if err = firstErr(err, terr, perr); err != nil {
			r.Ignored = append(r.Ignored, fmt.Sprintf("RateLimit %q: %v", clip(m.name), err))
			continue
		}
		if hasPK && pk == nil {
			pk = b
		}
		if u, known := units[m.name]; known && u != unitRequests {
			continue // what is left of a bytes or concurrency quota is no count of requests
		}
		count(int(min(left, math.MaxInt32)))
		if fewest < 0 || left < fewest {
			fewest = left
			r.Reset, r.HasReset = time.Duration(min(t, maxWindow))*time.Second, hasT
		}
	}
	if pk != nil {
		r.PartitionKey = pk
	}
}

func readPolicy(m sfMember) (policy, error) {
	p := policy{member: m.name, unit: unitRequests}
	q, ok, err := sfInt(m, "q")
	if err == nil && !ok {
		err = fmt.Errorf("no q (the quota is required)")
	}
	w, hasW, werr := sfInt(m, "w")
	if werr == nil && hasW && (w == 0 || w > maxWindow) {
		werr = fmt.Errorf("w=%d, want 1 to %d seconds", w, maxWindow)
	}
	pk, hasPK, perr := sfBytes(m, "pk")
	if err = firstErr(err, werr, perr); err != nil {
		return policy{}, err
	}
	if u, ok := sfWord(m, "qu"); ok {
		switch u {
		case unitRequests, "request": // the draft's registry spells it "request"
		case unitBytes, unitConcurrent:
			p.unit = u
		default:
			return policy{}, fmt.Errorf("quota unit %q unknown", clip(u))
		}
	} else if _, sent := m.params["qu"]; sent {
		return policy{}, fmt.Errorf("qu=%q is not a string", clip(m.params["qu"]))
	}
	p.q, p.w, p.pk, p.hasPK = q, w, pk, hasPK
	return p, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// ReadAnswer is Read for a whole answer: it also recognises a 503 whose
// problem+json body is of type temporary reduced capacity
// (ReducedCapacityType), which the caller treats as a throttle, with the
// lower RateLimit-Policy it may carry already in Rate.
func (s Signals) ReadAnswer(status int, h http.Header, body []byte) Reading {
	r := s.Read(h)
	if status == http.StatusServiceUnavailable {
		if t, ok := problemType(h, body); ok && t == ReducedCapacityType {
			r.ReducedCapacity = true
		}
	}
	return r
}

// problemType is the type member of an application/problem+json body.
func problemType(h http.Header, body []byte) (string, bool) {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || mt != "application/problem+json" {
		return "", false
	}
	var p struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &p) != nil || p.Type == "" {
		return "", false
	}
	return p.Type, true
}

// Pause is how long the vendor asked the client to wait before its next
// request: Retry-After where it sent a usable one (draft-11 §7: it takes
// precedence over the effective window), else the effective window t of
// a RateLimit item with nothing left. ok is false when neither says to
// wait.
func Pause(h http.Header, r Reading, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After"); v != "" {
		if d, err := ParseRetryAfter(v, now); err == nil {
			return d, true
		}
	}
	if r.HasRemaining && r.Remaining == 0 && r.HasReset {
		return r.Reset, true
	}
	return 0, false
}
