package limiter

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A learned in-flight cap (docs/design.md, "Learned in-flight caps").
//
// A vendor may take only k requests of a credential at once and say so
// nowhere but in its 429s. The cap the fleet learns for it lives in the
// bucket's own item, beside tat: every grant's answer (ALL_NEW), failed
// condition's item and read carries it, so each process learns it from
// the writes it makes anyway, and nothing is written while nothing is
// learned. Only a lowering writes (LowerInFlight), one conditional write
// on the version the writer saw (ia), after the 429 that taught it.
// Raising costs no write: the cap climbs by one every CapQuiet (doubled
// for each failed raise in a row, up to 2^maxCapProbes) from when it was
// learned, the same for every process that read the item.
const (
	// capAttribute holds the learned cap (≥ 1).
	capAttribute = "ic"
	// capAtAttribute holds when it was learned (Unix µs): the version a
	// lowering is conditional on.
	capAtAttribute = "ia"
	// capProbesAttribute counts raises in a row that met a throttle.
	capProbesAttribute = "ip"
)

// CapQuiet is how long a learned in-flight cap holds before it rises by
// one; each raise that met a throttle doubles it for the next.
const CapQuiet = 5 * time.Minute

// maxCapProbes bounds the doublings of CapQuiet: at most 8× (40 min).
const maxCapProbes = 3

// capTTL keeps an item a lowering created (no grant yet) for a day.
const capTTL = 24 * time.Hour

// InFlightCap is a bucket's learned in-flight cap as its item records it.
type InFlightCap struct {
	Max    int   // the cap learned at At; 0: none
	At     int64 // Unix µs
	Probes int   // raises in a row that met a throttle
}

// Effective is the cap at now: Max, plus one for every quiet period
// (CapQuiet·2^Probes) since At. 0 means no cap: none was learned, or it
// has climbed back to MaxLeases, the most a lease set can bound.
func (c InFlightCap) Effective(now int64) int {
	if c.Max <= 0 {
		return 0
	}
	quiet := CapQuiet.Microseconds() << min(c.Probes, maxCapProbes)
	up := max(now-c.At, 0) / quiet
	if up >= MaxLeases || c.Max+int(up) >= MaxLeases {
		return 0
	}
	return c.Max + int(up)
}

// Lowered is c after a throttle at now of a request sent at sent (both
// Unix µs), while inFlight requests were at the vendor (the refused one
// included): one below the effective cap, under which the fleet had at
// most that many there, or, with none learned, half of inFlight (the
// process's own count, which other processes' requests may have joined);
// never below 1.
// A request sent before the cap was last lowered teaches nothing more:
// it went under the old one. A throttle met while the cap was climbing is
// a failed raise, and doubles the next quiet period. ok is false when
// nothing is lowered. LowerInFlight writes what it decides; limitertest
// decides with it too.
func (c InFlightCap) Lowered(now, sent int64, inFlight int) (next InFlightCap, ok bool) {
	eff := c.Effective(now)
	if eff > 0 && sent < c.At {
		return c, false
	}
	if eff == 1 {
		return c, false
	}
	target := min(inFlight, MaxLeases) / 2
	if eff > 0 {
		target = eff - 1
	}
	next = InFlightCap{Max: max(target, 1), At: now}
	if eff > c.Max {
		next.Probes = min(c.Probes+1, maxCapProbes)
	} else if eff > 0 {
		next.Probes = c.Probes
	}
	return next, true
}

// itemCap reads the learned cap of a bucket's item; a malformed one reads
// as none (the cap only ever lowers what the configuration allows).
func itemCap(item map[string]types.AttributeValue) InFlightCap {
	n, err1 := itemMicros(item, capAttribute)
	at, err2 := itemMicros(item, capAtAttribute)
	p, err3 := itemMicros(item, capProbesAttribute)
	if err1 != nil || err2 != nil || err3 != nil || n < 1 || n > MaxLeases || p < 0 {
		return InFlightCap{}
	}
	return InFlightCap{Max: int(n), At: at, Probes: int(min(p, maxCapProbes))}
}

// seenCaps remembers, per bucket, the cap the latest store answer this
// process had about its item recorded.
type seenCaps struct {
	mu sync.Mutex
	m  map[string]capEntry
}

type capEntry struct {
	cap InFlightCap
	at  int64 // µs: when the call that answered was sent
}

// learn records c as key's cap as of at; an answer to an earlier call
// coming back after a later one's is ignored.
func (s *seenCaps) learn(key string, c InFlightCap, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxSeenKeys {
		s.m = make(map[string]capEntry)
	}
	if e, ok := s.m[key]; ok && at < e.at {
		return
	}
	s.m[key] = capEntry{cap: c, at: at}
}

func (s *seenCaps) get(key string) InFlightCap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key].cap
}

// learnCap remembers the cap item records, as of at.
func (l *Limiter) learnCap(key string, item map[string]types.AttributeValue, at int64) {
	l.caps.learn(key, itemCap(item), at)
}

// InFlightCap is the in-flight cap the fleet learned for bucket key, as
// of the last store answer this process had about its item (every grant
// carries it), climbed to now; 0 when none holds. It makes no call.
func (l *Limiter) InFlightCap(key string) int {
	return l.caps.get(key).Effective(micros(l.now()))
}

// LowerInFlight records that the vendor throttled a request of bucket
// key, sent at sent, while inFlight requests of it (the refused one
// included) were at the vendor: the learned cap drops to one below the
// cap in force, or, with none, to half of inFlight (at least 1); a
// request sent before the cap in force was learned lowers nothing. One conditional write on
// the cap this process last saw; a failed condition hands back the item,
// whose cap may already be as low (no write) or is lowered from. No
// write when the known cap is already that low.
func (l *Limiter) LowerInFlight(ctx context.Context, key string, inFlight int, sent time.Time) error {
	if err := (Bucket{Key: key, Limit: PerSecond(1, 1)}).Validate(); err != nil {
		return err
	}
	seen := l.caps.get(key)
	for attempt := 0; attempt < l.attempts; attempt++ {
		now := micros(l.now())
		next, ok := seen.Lowered(now, micros(sent), inFlight)
		if !ok {
			return nil
		}
		_, err := l.updatePenalty(ctx, l.lowerCapInput(key, seen, next, now))
		if err == nil {
			l.caps.learn(key, next, now)
			return nil
		}
		item, failed := conditionFailed(err)
		if !failed {
			return contention(key, err)
		}
		seen = itemCap(item)
		l.caps.learn(key, seen, now)
	}
	return &ContendedError{Key: key, Writes: l.attempts}
}

// lowerCapInput writes next over seen, the cap the writer saw (none: the
// item has no cap yet).
func (l *Limiter) lowerCapInput(key string, seen, next InFlightCap, now int64) *dynamodb.UpdateItemInput {
	cond := "attribute_not_exists(#ic)"
	values := map[string]types.AttributeValue{
		":ic": num(int64(next.Max)), ":ia": num(next.At), ":ip": num(int64(next.Probes)),
		":ttl": num(ttlSeconds(now + capTTL.Microseconds())),
	}
	if seen.Max > 0 {
		cond = "#ic = :sic AND #ia = :sia"
		values[":sic"], values[":sia"] = num(int64(seen.Max)), num(seen.At)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{KeyAttribute: str(key)},
		UpdateExpression:                    aws.String("SET #ic = :ic, #ia = :ia, #ip = :ip, #ttl = if_not_exists(#ttl, :ttl)"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            map[string]string{"#ic": capAttribute, "#ia": capAtAttribute, "#ip": capProbesAttribute, "#ttl": TTLAttribute},
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
