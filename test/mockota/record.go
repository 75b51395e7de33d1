package mockota

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// Request is one request as the vendor saw it. Fields the request did not
// carry (a missing X-Job-Id, an unparsable path) are empty.
type Request struct {
	JobID      string
	Credential string
	Endpoint   string
	// At is the arrival time on the server's clock (Config.Now), which is
	// also the time the limiter decided at.
	At time.Time
	// Status is the HTTP status answered. A request whose client gave up
	// during Config.Latency is still recorded with the status it would
	// have had: the vendor processed it, as a real one would.
	Status int
	// Metered says the request was well-formed and reached the rate limit
	// (accepted, refused with 429, or failed on purpose by FailNext): one
	// the vendor counts.
	Metered bool
	// Refused says the vendor answered with an error in the body (a
	// Config.Wire format's 200 with Errors): not applied, whatever the
	// status.
	Refused bool
	// Read says the request read back what the vendor holds (a parity
	// check's ProductAvailRateRetrievalRQ): metered, never applied.
	Read bool
	Body []byte
}

func accepted(status int) bool { return status >= 200 && status < 300 }

// applied reports whether the vendor applied r: a 2xx push that carried
// no error in its body.
func (r Request) applied() bool { return accepted(r.Status) && !r.Refused && !r.Read }

// Requests returns every request received, in the order the limiter decided
// them (arrival order), including malformed and refused ones.
func (s *Server) Requests() []Request {
	return s.filter(func(Request) bool { return true })
}

// Accepted returns the requests answered 2xx without an error in the body,
// in arrival order: what the vendor actually applied.
func (s *Server) Accepted() []Request {
	return s.filter(func(r Request) bool { return r.applied() })
}

// Count429 is the number of requests answered 429, injected ones included:
// every 429 is one a real vendor would count against the fleet.
func (s *Server) Count429() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.log {
		if r.Status == 429 {
			n++
		}
	}
	return n
}

// AcceptedByJob counts acceptances per job id, so that a test can assert
// exactly-once delivery: every job present, none with a count above 1.
func (s *Server) AcceptedByJob() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int)
	for _, r := range s.log {
		if r.applied() {
			m[r.JobID]++
		}
	}
	return m
}

// AcceptedTimes returns the arrival times of the requests accepted on one
// (credential, endpoint) bucket, in order, for checking the fleet invariant
// (grants ≤ burst + rate·W over every window W) from outside the fleet.
func (s *Server) AcceptedTimes(credential, endpoint string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ts []time.Time
	for _, r := range s.log {
		if r.applied() && r.Credential == credential && r.Endpoint == endpoint {
			ts = append(ts, r.At)
		}
	}
	return ts
}

// filter copies, bodies included, so a caller can keep or modify the result
// while the server goes on recording.
func (s *Server) filter(keep func(Request) bool) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.log {
		if keep(r) {
			r.Body = bytes.Clone(r.Body)
			out = append(out, r)
		}
	}
	return out
}

// ArrivalTimes returns the arrival times of every metered request on one
// (credential, endpoint) bucket, accepted or not: what the fleet sent.
func (s *Server) ArrivalTimes(credential, endpoint string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ts []time.Time
	for _, r := range s.log {
		if r.Metered && r.Credential == credential && r.Endpoint == endpoint {
			ts = append(ts, r.At)
		}
	}
	return ts
}

// FullestWindow is the vendor-side invariant's report for one bucket: the
// window of accepted requests fullest relative to burst + rate·W of the
// endpoint's published limit, and whether any window broke it. It is
// computed by package window, which shares no code with sdk/gcra, whatever
// Config.Enforce the server ran with.
func (s *Server) FullestWindow(credential, endpoint string) (window.Window, bool) {
	return window.Fullest(s.AcceptedTimes(credential, endpoint), windowLimit(s.cfg.limit(endpoint)))
}

// FullestWindowSent is FullestWindow over every metered request, refused
// ones included: whether the fleet sent more than the limit allows, which
// a vendor that enforces it answers with 429s.
func (s *Server) FullestWindowSent(credential, endpoint string) (window.Window, bool) {
	return window.Fullest(s.ArrivalTimes(credential, endpoint), windowLimit(s.cfg.limit(endpoint)))
}

// CheckWindows asserts the vendor-side invariant on every bucket that
// accepted anything: no window of accepted requests holds more than burst
// + rate·W of its published limit. It uses package window, not sdk/gcra, so
// a bug in the bucket arithmetic fails here. It returns nil when the
// invariant holds and an error naming each broken bucket's fullest window
// otherwise.
func (s *Server) CheckWindows() error {
	s.mu.Lock()
	byBucket := map[bucketKey][]time.Time{}
	for _, r := range s.log {
		if r.applied() && r.Metered {
			k := bucketKey{r.Credential, r.Endpoint}
			byBucket[k] = append(byBucket[k], r.At)
		}
	}
	s.mu.Unlock()
	keys := make([]bucketKey, 0, len(byBucket))
	for k := range byBucket {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].credential != keys[j].credential {
			return keys[i].credential < keys[j].credential
		}
		return keys[i].endpoint < keys[j].endpoint
	})
	var errs []error
	for _, k := range keys {
		if err := window.Check(byBucket[k], windowLimit(s.cfg.limit(k.endpoint))); err != nil {
			errs = append(errs, fmt.Errorf("mockota: %s/%s accepted too much: %w", k.credential, k.endpoint, err))
		}
	}
	return errors.Join(errs...)
}
