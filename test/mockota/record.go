package mockota

import (
	"bytes"
	"time"
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
	Body   []byte
}

func accepted(status int) bool { return status >= 200 && status < 300 }

// Requests returns every request received, in the order the limiter decided
// them (arrival order), including malformed and refused ones.
func (s *Server) Requests() []Request {
	return s.filter(func(Request) bool { return true })
}

// Accepted returns the requests answered 2xx, in arrival order: what the
// vendor actually applied.
func (s *Server) Accepted() []Request {
	return s.filter(func(r Request) bool { return accepted(r.Status) })
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
		if accepted(r.Status) {
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
		if accepted(r.Status) && r.Credential == credential && r.Endpoint == endpoint {
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
