package limiter

import "sync"

// maxSeenKeys bounds the cache; a process touching more buckets than this
// simply forgets them all and relearns each from its next write.
const maxSeenKeys = 1 << 16

// seenTAT remembers the highest tat this process has seen per bucket. tat
// only ever grows in the store, so the remembered value is a lower bound on
// the real one, and that is enough for two things:
//   - choosing the update form (a bucket seen busy is most likely still busy);
//   - the denial cache: a request denied against a lower bound of tat is
//     denied against the real tat too, so it is answered with no call.
//
// A bucket deleted by its TTL was full anyway (its tat had passed), so a
// stale entry never denies wrongly.
type seenTAT struct {
	mu sync.Mutex
	m  map[string]int64
}

func (s *seenTAT) get(key string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// observe records tat for key if it is newer than what was seen.
func (s *seenTAT) observe(key string, tat int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxSeenKeys {
		s.m = make(map[string]int64)
	}
	if tat > s.m[key] {
		s.m[key] = tat
	}
}

// forget drops what was seen for key: used when the store says the item is
// gone, the one case where tat went backwards.
func (s *seenTAT) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}
