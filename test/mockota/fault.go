package mockota

import "fmt"

// FailNext makes the next times requests for jobID that pass the rate limit
// answer status (400–599) instead of being accepted. Calls queue up, so
// FailNext(j, 503, 1) then FailNext(j, 500, 1) answers 503, then 500.
//
// Injected failures are charged a token, as a real vendor charges for any
// request that reached it: a client that retries failures blindly then
// shows up as a rate problem, not only a correctness one. A request refused
// with 429 consumes no injected failure, so the failure still happens on the
// first request that gets through. Injected answers carry the rate headers
// but no Retry-After, even an injected 429, to exercise a client's fallback
// when the vendor gives no hint.
//
// It panics on a status outside 400–599 or a negative times, which are
// mistakes in the calling test.
func (s *Server) FailNext(jobID string, status int, times int) {
	if status < 400 || status > 599 {
		panic(fmt.Sprintf("mockota: FailNext status %d, want 400–599", status))
	}
	if times < 0 {
		panic(fmt.Sprintf("mockota: FailNext times %d, want ≥ 0", times))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for range times {
		s.failures[jobID] = append(s.failures[jobID], status)
	}
}

// FailMatching makes every request that passes the rate limit and that
// match accepts answer status (400–599) until stop is called: a vendor
// that refuses any push carrying one bad item, or is down for longer than
// any retry budget, whatever job ids the pushes carry. Injected as
// FailNext's failures are (charged a token, no Retry-After); a FailNext
// queued for the request's job id comes first. match runs under the
// server's lock and must not call the Server.
func (s *Server) FailMatching(status int, match func(Request) bool) (stop func()) {
	if status < 400 || status > 599 {
		panic(fmt.Sprintf("mockota: FailMatching status %d, want 400–599", status))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &matchFailure{status: status, match: match}
	s.matching = append(s.matching, f)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		f.stopped = true
	}
}

type matchFailure struct {
	status  int
	match   func(Request) bool
	stopped bool
}

// injected pops the next injected failure for rec's job id, or answers
// the first FailMatching that matches rec, or 0. The caller holds s.mu.
func (s *Server) injected(rec Request) int {
	jobID := rec.JobID
	q := s.failures[jobID]
	if len(q) == 0 {
		for _, f := range s.matching {
			if !f.stopped && f.match(rec) {
				return f.status
			}
		}
		return 0
	}
	if len(q) == 1 {
		delete(s.failures, jobID)
	} else {
		s.failures[jobID] = q[1:]
	}
	return q[0]
}
