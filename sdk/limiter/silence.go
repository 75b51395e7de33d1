package limiter

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// silenceAttribute holds, in Unix microseconds, the end of the latest
// silence a vendor asked of the bucket (a 429's Retry-After, as Penalize
// and a throttle's penalty receive it). A penalty only delays the grants
// made after it; this is what tells a slot granted before it that it lies
// inside the silence (Silence).
const silenceAttribute = "su"

// Silence is the end of the silence the vendor asked of bucket b (the
// until of a Penalize or of an adaptive bucket's Throttle) if now lies
// inside it, and the zero time if it lies inside none.
//
// A penalty delays only the grants made after it: a slot granted before
// it, and spent after it, would reach the vendor inside the silence its
// Retry-After asked for. So a slot granted SilenceAfter or more before it
// is spent asks first (Wait does; the dispatcher does for every slot a job
// holds from further ahead than that: a deferred job's, a batch's, a
// lingering job's). A slot inside a silence is not spent: book again, or
// come back at its end.
//
// It answers from the last store answer this process had about the
// bucket's item (any grant's, failed condition's or read's) if that was
// sent within SilenceAfter, with no call; otherwise it costs one strongly
// consistent read (one read unit: the item is under 1 KB). On a store
// failure the error is returned and the time is zero: the caller fails
// closed (defers) on the error.
func (l *Limiter) Silence(ctx context.Context, b Bucket) (time.Time, error) {
	if err := b.Validate(); err != nil {
		return time.Time{}, err
	}
	now := micros(l.now())
	until, fresh := l.silent.get(b.Key, now, SilenceAfter.Microseconds())
	if !fresh {
		if _, _, err := l.read(ctx, b.Key); err != nil {
			return time.Time{}, err
		}
		until, _ = l.silent.get(b.Key, now, SilenceAfter.Microseconds())
	}
	if until <= micros(l.now()) {
		return time.Time{}, nil
	}
	return time.UnixMicro(until), nil
}

// KnownSilence is the end of the latest silence this process learned of
// bucket b (from a store answer about its item, or asked of this process
// by the vendor through Penalize or Throttle, even if that write failed)
// if now lies inside it, and the zero time otherwise, however old that
// answer. It makes no call, so it answers while the store is unreachable:
// what a process pushing within a local share (package fallback) still
// knows the vendor asked. A silence asked since by another worker, and
// not yet read here, is not known.
func (l *Limiter) KnownSilence(b Bucket) time.Time {
	now := micros(l.now())
	until, _ := l.silent.get(b.Key, now, 1<<62)
	until = max(until, l.heard.get(b.Key))
	if until > now {
		return time.UnixMicro(until)
	}
	return time.Time{}
}

// heardSilence remembers, per bucket, the latest silence this process was
// told by the vendor itself (Penalize, Throttle), whether or not its write
// reached the store. seenSilence follows the store's answers, so a write
// lost to an outage leaves it nothing, and the next answer without the
// silence would replace what it learned; a process that heard a 429 knows
// the vendor asked for the silence all the same, and KnownSilence (the
// local share's check while the store is out) must not forget it. Only
// ever later: a Reset of the item does not undo what the vendor said.
type heardSilence struct {
	mu sync.Mutex
	m  map[string]int64 // µs
}

func (h *heardSilence) add(key string, until int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxSeenKeys {
		h.m = make(map[string]int64)
	}
	h.m[key] = max(h.m[key], until)
}

func (h *heardSilence) get(key string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[key]
}

// SilenceAfter is how long before its spending a slot must have been
// granted to be checked for a silence (Silence), and how old the store
// answer Silence may go by: a penalty that lands between a grant and its
// spending less than SilenceAfter later is a race of the store's latency
// with the send, as for a slot granted at once, and reading for every
// such slot would add a read to nearly every push of a saturated bucket.
// It is ConfirmAfter: an adaptive bucket's confirming read answers both.
const SilenceAfter = ConfirmAfter

// itemSilence is the end of the silence item records: its silent-until
// attribute, or, on an adaptive bucket, a throttle's Since (the end of its
// Retry-After), whichever is later. 0 for none.
func itemSilence(item map[string]types.AttributeValue) (int64, error) {
	su, err := itemMicros(item, silenceAttribute)
	if err != nil {
		return 0, err
	}
	st, err := itemAdapt(item)
	if err != nil {
		return 0, err
	}
	return max(su, st.Since), nil
}

// learnSilence remembers the silence item records, as of `at` (when the
// call that item answers was sent: the item is at least that recent), and
// the in-flight cap beside it (learnCap): both are what the fleet was
// told by the vendor's 429s. An item that cannot be read is left to the
// callers that parse it too.
func (l *Limiter) learnSilence(key string, item map[string]types.AttributeValue, at int64) {
	if until, err := itemSilence(item); err == nil {
		l.silent.learn(key, until, at)
	}
	if p, su, err := itemProbation(item); err == nil {
		l.probation.learn(key, p, su, at)
	}
	l.learnCap(key, item, at)
}

// seenSilence remembers, per bucket, the silence the latest store answer
// this process had recorded (0 for none), and when the call it answered
// was sent.
type seenSilence struct {
	mu sync.Mutex
	m  map[string]silenceEntry
}

type silenceEntry struct {
	until int64 // µs; 0: none
	at    int64 // µs by the limiter's clock
}

// learn records until as the bucket's silence as of at. An answer to an
// earlier call, coming back after a later one's, only adds a later end:
// a Reset (which removes the silence) is known from the later answer.
func (s *seenSilence) learn(key string, until, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxSeenKeys {
		s.m = make(map[string]silenceEntry)
	}
	e, ok := s.m[key]
	switch {
	case !ok || at >= e.at:
		s.m[key] = silenceEntry{until: until, at: at}
	case until > e.until:
		e.until = until
		s.m[key] = e
	}
}

// get returns the silence known for key and whether it was learned no
// more than maxAge µs before now.
func (s *seenSilence) get(key string, now, maxAge int64) (until int64, fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	return e.until, ok && now-e.at <= maxAge
}
