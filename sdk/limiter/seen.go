package limiter

import "sync"

// maxSeenKeys bounds the cache; a process touching more buckets than this
// simply forgets them all and relearns each from its next write.
const maxSeenKeys = 1 << 16

// seenTAT remembers, per bucket, the highest tat this process has seen, the
// booked horizon (the highest tat a grant left, attribute bk) and when (by
// the limiter's clock). Both only grow in the store, but for two writes: a
// Reset lowers tat to the booked horizon, dropping a penalty no slot is
// booked behind, and an operator may delete the item. So the remembered
// values are lower bounds, and that is enough for two things:
//   - choosing the update form (a bucket seen busy is most likely still busy);
//   - the denial cache: a request denied against a lower bound of tat is
//     denied against the real tat too, so it is answered with no call.
//
// The denial cache answers only from a tat no Reset can lower: one at the
// booked horizon, seen within the limiter's cache age. A tat a penalty (or
// an adaptive bucket's lowering) raised above the booked horizon may have
// been reset since, so a denial it predicts is confirmed by a write, whose
// failed condition hands back the current item: the wait the caller gets is
// the one the bucket has, not one a Reset undid. An older entry still picks
// the form, and its denials are confirmed the same way, which bounds how
// long a deleted item goes unnoticed. A bucket deleted by its TTL was full
// anyway (its tat had passed), so a stale entry never denies wrongly.
type seenTAT struct {
	mu sync.Mutex
	m  map[string]seenEntry
}

type seenEntry struct {
	tat    int64 // µs
	booked int64 // µs, ≤ tat: the highest tat a grant left
	at     int64 // when tat was seen, µs by the limiter's clock
}

// get returns the tat seen for key (0 if none) and whether it was seen no
// more than maxAge µs before now.
func (s *seenTAT) get(key string, now, maxAge int64) (tat int64, fresh bool) {
	tat, _, fresh = s.lookup(key, now, maxAge)
	return tat, fresh
}

// lookup is get with the booked horizon seen for key.
func (s *seenTAT) lookup(key string, now, maxAge int64) (tat, booked int64, fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok {
		return 0, 0, false
	}
	return e.tat, e.booked, now-e.at <= maxAge
}

// observe records tat for key, seen at `at`, if it is not older than what
// was seen: concurrent calls of one process may report their answers out of
// order, and the highest is the best lower bound. It says nothing of the
// booked horizon (a penalty's tat, say).
func (s *seenTAT) observe(key string, tat, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if e := s.m[key]; tat >= e.tat {
		s.m[key] = seenEntry{tat: tat, booked: e.booked, at: at}
	}
}

// book records a grant that left tat, seen at `at`: tat is then also the
// booked horizon (or a lower bound of it, for an answer overtaken by a
// concurrent one). A grant below a penalty seen before shows the penalty
// reset, or is an answer overtaken by it; the penalty answers no denial
// either way (see final), and keeping it would only size batches and pick
// forms for a bucket that is gone, so the grant's tat replaces it.
func (s *seenTAT) book(key string, tat, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	e := s.m[key]
	switch {
	case tat >= e.tat:
		e.tat, e.at = tat, at
	case e.tat > e.booked:
		e.tat, e.at = max(tat, e.booked), at
	}
	e.booked = max(e.booked, tat)
	s.m[key] = e
}

// set records tat and booked for key as the store's current values, even
// if lower than what was seen: used for an item a failed condition, a read
// or a Reset just handed back, which is the truth (a reset bucket, a
// recreated item) as of that call. Were it an answer overtaken by a
// concurrent one, lower values are still lower bounds, so this is always
// safe.
func (s *seenTAT) set(key string, tat, booked, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.m[key] = seenEntry{tat: tat, booked: booked, at: at}
}

func (s *seenTAT) init() {
	if s.m == nil || len(s.m) >= maxSeenKeys {
		s.m = make(map[string]seenEntry)
	}
}
