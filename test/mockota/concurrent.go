package mockota

// The vendor's own count of concurrent requests (Config.MaxConcurrent):
// a request counts from the moment its handler decides it until the
// handler returns (its answer written, or its client gone), under the
// server's lock, with nothing taken from the limiter.

// enter counts a request of k in and reports whether it is one more than
// the vendor works on at once (it still counts until it leaves).
func (s *Server) enter(k bucketKey) (over bool) {
	s.running[k]++
	s.peak[k] = max(s.peak[k], s.running[k])
	return s.cfg.MaxConcurrent > 0 && s.running[k] > s.cfg.MaxConcurrent
}

// leave counts a request of k out.
func (s *Server) leave(k bucketKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running[k]--
}

// PeakConcurrent is the most requests of (credential, endpoint) the vendor
// had in its handlers at once, refused ones included.
func (s *Server) PeakConcurrent(credential, endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak[bucketKey{credential, endpoint}]
}
