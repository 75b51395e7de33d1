package mockota

import (
	"context"
	"time"
)

// The vendor's own count of concurrent requests (Config.MaxConcurrent):
// a request counts from the moment its handler decides it until the
// handler returns (its answer written, or its client gone), under the
// server's lock, with nothing taken from the limiter.

// enter counts a request of k in and reports whether it is one more than
// the vendor works on at once (it still counts until it leaves), and,
// while Config.Gather requests of k have never run at once, the channel
// closed when they first do (nil otherwise: nothing to wait for).
func (s *Server) enter(k bucketKey) (over bool, gathering <-chan struct{}) {
	s.running[k]++
	s.peak[k] = max(s.peak[k], s.running[k])
	if s.cfg.Gather > 0 && !s.gathered[k] {
		c, ok := s.gathering[k]
		if !ok {
			c = make(chan struct{})
			s.gathering[k] = c
		}
		if s.running[k] >= s.cfg.Gather {
			close(c)
			delete(s.gathering, k)
			s.gathered[k] = true
		} else {
			gathering = c
		}
	}
	return s.cfg.MaxConcurrent > 0 && s.running[k] > s.cfg.MaxConcurrent, gathering
}

// gather waits, for a request that entered while its bucket was gathering,
// until Config.Gather requests have run at once or GatherWait has passed.
func (s *Server) gather(ctx context.Context, gathering <-chan struct{}) {
	if gathering == nil {
		return
	}
	t := time.NewTimer(s.cfg.GatherWait)
	defer t.Stop()
	select {
	case <-gathering:
	case <-t.C:
	case <-ctx.Done():
	}
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
