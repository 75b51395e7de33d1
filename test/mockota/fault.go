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

// injected pops the next injected failure for jobID, or 0. The caller holds
// s.mu.
func (s *Server) injected(jobID string) int {
	q := s.failures[jobID]
	if len(q) == 0 {
		return 0
	}
	if len(q) == 1 {
		delete(s.failures, jobID)
	} else {
		s.failures[jobID] = q[1:]
	}
	return q[0]
}
