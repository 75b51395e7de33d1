package limiter

import (
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// The probation a fixed-rate bucket keeps after the vendor refused it
// again right after a silence (gcra.Probation): its spacing factor and the
// end of it, in Unix microseconds. Written only with a silence (penalize),
// removed by Reset.
const (
	probationSpacingAttribute = "ps"
	probationUntilAttribute   = "pu"
)

// itemProbation reads an item's probation and its raw silence attribute
// (the silence the probation was decided after).
func itemProbation(item map[string]types.AttributeValue) (p gcra.Probation, silence int64, err error) {
	if p.Spacing, err = itemMicros(item, probationSpacingAttribute); err != nil {
		return p, 0, err
	}
	if p.Until, err = itemMicros(item, probationUntilAttribute); err != nil {
		return p, 0, err
	}
	silence, err = itemMicros(item, silenceAttribute)
	return p, silence, err
}

// Spacing is the factor bucket b's slots are spaced by now, by the last
// store answer this process had about its item, with no call: 1 unless the
// vendor refused its first requests after a silence (gcra.Probation). A
// vendor that takes less than the configured rate takes smaller requests
// too (one that halved its limit halved its burst): a caller sizing a
// request by the bucket's capacity (cost by items) sizes it by that much
// less.
func (l *Limiter) Spacing(b Bucket) int64 { return l.spacing(b, micros(l.now())) }

// spacing is the factor bucket b's grants are spaced by at now, from the
// last store answer this process had about its item. Only a bucket of fixed
// rate is put on probation: an adaptive one learns the vendor's rate, and
// one with shares paces its leases by its own rules.
func (l *Limiter) spacing(b Bucket, now int64) int64 {
	if b.Adaptive != nil || b.Share != nil {
		return 1
	}
	p, _ := l.probation.get(b.Key)
	return p.Factor(now)
}

// seenProbation remembers, per bucket, the probation and the raw silence
// the latest store answer this process had recorded, as seenSilence does
// for the silence alone: the penalty that decides the next probation
// writes it conditional on that silence, so a decision made on an old
// view fails and is made again.
type seenProbation struct {
	mu sync.Mutex
	m  map[string]probationEntry
}

type probationEntry struct {
	p       gcra.Probation
	silence int64 // µs; 0: none
	at      int64 // µs by the limiter's clock
}

func (s *seenProbation) learn(key string, p gcra.Probation, silence, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxSeenKeys {
		s.m = make(map[string]probationEntry)
	}
	if e, ok := s.m[key]; ok && at < e.at {
		return
	}
	s.m[key] = probationEntry{p: p, silence: silence, at: at}
}

func (s *seenProbation) get(key string) (gcra.Probation, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key]
	return e.p, e.silence
}
