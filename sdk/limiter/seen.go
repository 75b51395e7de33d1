package limiter

import "sync"

// maxSeenKeys bounds the cache; a process touching more buckets than this
// simply forgets them all and relearns each from its next write.
const maxSeenKeys = 1 << 16

// seenTAT remembers, per bucket, the highest tat this process has seen and
// when (by the limiter's clock). tat only grows in the store, except when an
// operator resets or deletes a bucket, so the remembered value is a lower
// bound on the real one, and that is enough for two things:
//   - choosing the update form (a bucket seen busy is most likely still busy);
//   - the denial cache: a request denied against a lower bound of tat is
//     denied against the real tat too, so it is answered with no call.
//
// A reset breaks the lower bound, so a denial is only answered from the
// cache while the entry is younger than the limiter's cache age; an older
// entry still picks the form, but a denial it predicts is confirmed by a
// write, whose failed condition hands back the current item. A bucket
// deleted by its TTL was full anyway (its tat had passed), so a stale entry
// never denies wrongly.
type seenTAT struct {
	mu sync.Mutex
	m  map[string]seenEntry
}

type seenEntry struct {
	tat int64 // µs
	at  int64 // when it was seen, µs by the limiter's clock
}

// get returns the tat seen for key (0 if none) and whether it was seen no
// more than maxAge µs before now.
func (s *seenTAT) get(key string, now, maxAge int64) (tat int64, fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok {
		return 0, false
	}
	return e.tat, now-e.at <= maxAge
}

// observe records tat for key, seen at `at`, if it is not older than what
// was seen: concurrent calls of one process may report their answers out of
// order, and the highest is the best lower bound.
func (s *seenTAT) observe(key string, tat, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if e := s.m[key]; tat >= e.tat {
		s.m[key] = seenEntry{tat: tat, at: at}
	}
}

// set records tat for key as the store's current value, even if it is lower
// than what was seen: used for an item a failed condition just handed back,
// which is the truth (a reset bucket, a recreated item) as of that write.
// Were it an answer overtaken by a concurrent one, a lower value is still a
// lower bound, so this is always safe.
func (s *seenTAT) set(key string, tat, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.m[key] = seenEntry{tat: tat, at: at}
}

func (s *seenTAT) init() {
	if s.m == nil || len(s.m) >= maxSeenKeys {
		s.m = make(map[string]seenEntry)
	}
}
