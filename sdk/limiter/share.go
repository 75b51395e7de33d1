package limiter

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// Share is a bucket's leased shares (see gcra.Share and "Leased shares" in
// docs/design.md): while the shared part idles, an execution environment
// takes a lease with the write that books its request, and spends the
// lease locally, with no write, until the epoch ends.
type Share = gcra.Share

// The attributes of a bucket with shares, beside tat:
//   - nw: the tat the last share-aware grant left. A write that does not
//     know the shares (an earlier release, Penalize, Reset) leaves tat ≠ nw.
//   - ow: when a share-aware write last found tat ≠ nw (or no item): leases
//     are taken only Quiet after it.
//   - sk: the epoch of the latest lease; sn<k>: the leases taken in epoch
//     k. The count's name carries its epoch, so that a lease write need not
//     know whether the epoch's count has begun (if_not_exists starts it):
//     with one count reset each epoch, every environment's first lease
//     write of an epoch guessed which, and all but the first guessed
//     wrong. A lease write removes the count of two epochs before.
const (
	markAttribute    = "nw"
	unknownAttribute = "ow"
	epochAttribute   = "sk"
)

// countAttribute is the name of epoch k's lease count.
func countAttribute(k int64) string { return "sn" + strconv.FormatInt(k, 10) }

// shareForm is what a share-aware write asserts and does.
type shareForm int

const (
	// marked: the last grant was share-aware; charged at the carve of the
	// leases the write asserts (its epoch's count at most n).
	marked shareForm = iota
	// unmarked: something that does not know the shares wrote last (or
	// there is no item); charged at the whole carve, records ow.
	unmarked
	// lease: marked, idle, quiet (one token or a batch): takes one of
	// the epoch's leases too, if fewer than M are taken; charged at the
	// whole carve.
	lease
	// whole: marked, idle, one token: charged at the whole carve,
	// asserting no count. An idle bucket loses at most the refill of one
	// token's carve by it, and a write that asserts a count fails
	// whenever a lease was taken since its process last saw the item.
	whole
)

// shareView is what this process knows of a bucket's shares.
type shareView struct {
	known  bool
	marked bool  // tat = nw when last seen
	ow     int64 // µs
	epoch  int64 // sk
	n      int   // sn
	lease  gcra.Lease
	leased bool // lease is this process's lease of lease.Epoch
	spent  bool // lease has granted at least once
	aged   bool // the deciding process has run for Quiet: no mark asserted
	// why is, for a write of form whole, why it took no lease.
	why string
}

type seenShares struct {
	mu sync.Mutex
	m  map[string]shareView
	// leased counts leases this process took, and local how many grants
	// they made: the quota leases held that no request used is
	// leased·(their tokens) − local.
	leased, local, leasedTokens int64
	// misses counts requests a lease did not grant, by why (the Miss
	// names); wrote counts the share-aware writes that landed, by form;
	// failed the share-aware writes whose condition failed, by what the
	// item handed back showed (the Failed names).
	misses, wrote, failed map[string]int64
}

// String names the form in ShareStats.Failed.
func (f shareForm) String() string {
	return [...]string{"marked", "unmarked", "lease", "whole"}[f]
}

// Why a request of a bucket with shares was not granted by a lease: the
// keys of ShareStats.Misses.
const (
	MissSeveral = "several tokens at once"
	MissSilent  = "a silence known"
	MissUnheard = "the item unread, the store failing"
	MissPenalty = "a penalty known"
	MissNone    = "no lease of the bucket ever"
	MissEnded   = "no lease in this epoch (the last one ended)"
	MissFresh   = "the lease's pacer empty, never spent yet"
	MissEmpty   = "the lease's pacer empty"
	MissClump   = "a batch beyond what the lease banked"
)

// The forms of share-aware writes: the keys of ShareStats.Writes.
const (
	WroteLease    = "took a lease"
	WroteShared   = "shared: bucket busy or several tokens"
	WroteUnmarked = "unmarked item"
	WroteFull     = "idle, no lease: the epoch's leases all taken (as seen)"
	WroteHeld     = "idle, no lease: holds this epoch's lease"
	WroteNotQuiet = "idle, no lease: not quiet"
)

// What the item a share-aware write's failed condition handed back showed
// (the first that applies): the keys of ShareStats.Failed.
const (
	FailedIdle  = "guessed idle, found busy"
	FailedBusy  = "guessed busy, found idle"
	FailedLimit = "busy past the write's limit"
	FailedMark  = "the mark (tat ≠ nw, or marked as unmarked)"
	FailedCount = "the epoch's lease count past what it asserted"
	FailedQuiet = "not quiet (ow)"
	FailedOther = "other (its own write landed, an adaptive version)"
)

// failedWhy names what item, handed back by the failed condition of a
// share-aware write of forms f and sf at now (its busy limit limitTAT, M
// leases an epoch), shows went wrong.
func failedWhy(f form, sf shareForm, v shareView, leases int, item map[string]types.AttributeValue, now, limitTAT int64) string {
	tat, _ := itemTAT(item)
	_, hasTAT := item[TATAttribute]
	nw, _ := itemMicros(item, markAttribute)
	_, hasNW := item[markAttribute]
	switch {
	case f == idle && hasTAT && tat > now:
		return FailedIdle
	case f == busy && (!hasTAT || tat <= now):
		return FailedBusy
	case f == busy && tat > limitTAT:
		return FailedLimit
	case sf == unmarked && hasTAT && hasNW && nw == tat:
		return FailedMark
	case sf != unmarked && !v.aged && (!hasNW || nw != tat):
		return FailedMark
	}
	c, _ := itemMicros(item, countAttribute(v.epoch))
	switch {
	case sf == marked && c > int64(v.n), sf == lease && c >= int64(leases):
		return FailedCount
	case sf == lease && !v.aged:
		return FailedQuiet
	}
	return FailedOther
}

func (s *seenShares) count(m *map[string]int64, why string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *m == nil {
		*m = make(map[string]int64)
	}
	(*m)[why] += int64(n)
}

// miss records n requests of a bucket with shares that no lease granted.
func (s *seenShares) miss(why string, n int) { s.count(&s.misses, why, n) }

// wrote records a share-aware write of form f that landed.
func (s *seenShares) wroteForm(f shareForm, v shareView) {
	why := WroteShared
	switch f {
	case lease:
		why = WroteLease
	case unmarked:
		why = WroteUnmarked
	case whole:
		why = v.why
	}
	s.count(&s.wrote, why, 1)
}

func (s *seenShares) get(key string) shareView {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// learn records what an answer showed of key's shares, keeping this
// process's lease.
func (s *seenShares) learn(key string, item map[string]types.AttributeValue) {
	tat, _ := itemTAT(item)
	nw, errNW := itemMicros(item, markAttribute)
	_, hasNW := item[markAttribute]
	ow, _ := itemMicros(item, unknownAttribute)
	sk, _ := itemMicros(item, epochAttribute)
	sn, _ := itemMicros(item, countAttribute(sk))
	_, hasTAT := item[TATAttribute]
	_, hasOW := item[unknownAttribute]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= maxSeenKeys {
		s.m = make(map[string]shareView)
	}
	v := s.m[key]
	v.known = true
	// Every share-aware item got ow from its first share-aware write: one
	// without it is taken as unmarked.
	v.marked = hasTAT && hasNW && hasOW && errNW == nil && nw == tat
	v.ow, v.epoch, v.n = ow, sk, int(sn)
	s.m[key] = v
}

// took records the lease a write at now took.
func (s *seenShares) took(key string, sh Share, lim Limit, now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.m[key]
	v.lease, v.leased, v.spent = sh.NewLease(lim, now), true, false
	s.m[key] = v
	s.leased++
	s.leasedTokens += sh.LeaseTokens(lim, now)
}

// busiest is the furthest ahead of now (µs) the tat of b's item runs
// without a penalty: the shared part's tolerance at the whole carve, its
// slowest, if that is longer than the bucket's own. A tat read from the
// store under a busy shared part lies there (10/s of burst 20 with half
// the rate leased: the shared part's 15 tokens at 5/s run 3 s ahead,
// past the bucket's 2 s), and taken for a penalty it would stop every
// lease; a penalty shorter than that is a silence the item records.
func busiest(b Bucket) int64 {
	return max(b.Limit.Tolerance(), b.Share.SharedLimit(b.Limit, b.Share.Leases).Tolerance())
}

// ready reports whether spend would grant a token of this process's
// lease of key at now, without taking it.
func (s *seenShares) ready(key string, sh Share, lim Limit, now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if !ok || !v.leased || now >= sh.EpochEnd(v.lease.Epoch) {
		return false
	}
	_, ok = sh.Spend(lim, v.lease, now)
	return ok
}

// spend takes one token of this process's lease of key at now, if it has
// one to give; if not, why (a Miss name).
func (s *seenShares) spend(key string, sh Share, lim Limit, now int64) (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	switch {
	case !ok || !v.leased:
		return false, MissNone
	case now >= sh.EpochEnd(v.lease.Epoch):
		return false, MissEnded
	}
	next, ok := sh.Spend(lim, v.lease, now)
	if !ok {
		if !v.spent {
			return false, MissFresh
		}
		return false, MissEmpty
	}
	v.lease, v.spent = next, true
	s.m[key] = v
	s.local++
	return true, ""
}

// ShareStats counts what this limiter's leases did: leases taken, the
// tokens they could grant at most (their rate until their epoch's end),
// and the requests they granted with no write. LeasedTokens − Local is
// quota the fleet could not use because a lease held it.
// Misses counts the requests a lease did not grant, by why (the Miss
// names), and Writes the share-aware writes that landed, by form (the
// Wrote names): what a cost analysis needs to see why pushes still write.
type ShareStats struct {
	Leases, LeasedTokens, Local int64
	Misses, Writes, Failed      map[string]int64
}

// ShareStats returns the counts so far.
func (l *Limiter) ShareStats() ShareStats {
	l.shares.mu.Lock()
	defer l.shares.mu.Unlock()
	return ShareStats{Leases: l.shares.leased, LeasedTokens: l.shares.leasedTokens, Local: l.shares.local,
		Misses: maps.Clone(l.shares.misses), Writes: maps.Clone(l.shares.wrote), Failed: maps.Clone(l.shares.failed)}
}

// localGrant grants n tokens of b from this process's lease with no write,
// when b has shares, n is 1, the lease's pacer has a token at now + ahead
// and no silence or penalty of the bucket is known here. The slot is now +
// ahead, as a write claiming that now would give (ReserveAhead): the
// caller has work to do before it sends, and the lease's slots stay one
// lease interval apart whatever each caller's ahead, which is what bounds
// its requests at the vendor.
func (l *Limiter) localGrant(ctx context.Context, b Bucket, n int, ahead time.Duration) (Reservation, bool) {
	r, why := l.tryLocal(ctx, b, n, ahead)
	if why != "" {
		l.shares.miss(why, n)
	}
	return r, why == "" && b.Share != nil
}

// tryLocal is localGrant without the count of misses: why is the Miss
// name of a refusal ("" when granted, or when b has no shares).
func (l *Limiter) tryLocal(ctx context.Context, b Bucket, n int, ahead time.Duration) (Reservation, string) {
	switch {
	case b.Share == nil:
		return Reservation{}, ""
	case n != 1:
		return Reservation{}, MissSeveral
	}
	now := micros(l.now())
	slot := now + max(ahead, 0).Microseconds()
	if !l.heardForLease(ctx, b, now, slot) {
		return Reservation{}, MissUnheard
	}
	if until, _ := l.silent.get(b.Key, now, 1<<62); until > now {
		return Reservation{}, MissSilent
	}
	if tat, _ := l.seen.get(b.Key, now, 1<<62); tat > now+busiest(b) {
		return Reservation{}, MissPenalty
	}
	if ok, why := l.shares.spend(b.Key, *b.Share, b.Limit, slot); !ok {
		return Reservation{}, why
	}
	return Reservation{Key: b.Key, Tokens: 1, Slot: time.UnixMicro(slot), Rate: b.Share.LeaseRate(b.Limit), Leased: true}, ""
}

// heardForLease makes what this process knows of b's silences and
// penalties fresh before its lease grants at now: an answer about the
// item within SilenceAfter, or one strongly consistent read. A lease
// grants with no write, so a 429's silence another environment wrote
// since this one last heard from the item would go unknown until the
// epoch's end, and its pushes would land inside the silence the vendor
// asked of the whole credential (adversary seed 1093: a day's Retry-After
// at 11.2 s, penalized by the environment that met it; another, last
// answered about the bucket at 9.4 s, sent on its lease at 15.9 s). It
// reads only when the lease has a token for slot, and is false when the
// read failed: the write path then answers as it would.
func (l *Limiter) heardForLease(ctx context.Context, b Bucket, now, slot int64) bool {
	if !l.shares.ready(b.Key, *b.Share, b.Limit, slot) {
		return true
	}
	if _, fresh := l.silent.get(b.Key, now, SilenceAfter.Microseconds()); fresh {
		return true
	}
	_, _, err := l.read(ctx, b.Key)
	return err == nil
}

// shareDecision is the limit a share-aware write of b at now is decided
// with, the form it takes and the view it asserts. tat is the tat seen.
//
// A process that has run for Quiet knows that no worker of the release
// before its deployment still runs (each invocation of it started before
// the deployment and lasts at most Quiet): it takes leases whatever wrote
// last, and asserts no mark (aged). A younger one takes a lease only on an
// item whose last write knew the shares and whose last write that did not
// is Quiet old.
//
// A write that finds the bucket idle takes a lease whether it books one
// token or a batch: an environment's first pushes of a bucket in an epoch
// mostly come as a clump, and a lease left to a later single push would
// leave that push and the clumps before it to writes. single says the write
// books one token: only such writes that take no lease go without
// asserting a count, so that an idle batch that takes none (this process
// holds its lease, or the epoch's are taken) is charged at the carve in
// force, not at the whole one.
func (l *Limiter) shareDecision(b Bucket, tat, now int64, single bool) (Limit, shareForm, shareView) {
	sh := *b.Share
	v := l.shares.get(b.Key)
	k := sh.EpochOf(now)
	v.aged = now-l.born >= sh.Quiet.Microseconds()
	if v.known && !v.marked && !v.aged {
		return sh.SharedLimit(b.Limit, sh.Leases), unmarked, v
	}
	n := 0
	if v.epoch == k {
		n = v.n
	} else {
		v.epoch, v.n = k, 0
	}
	// An unknown item is taken as marked, quiet and without leases: a
	// failed guess hands back the item to learn.
	quiet := v.aged || !v.known || v.ow <= now-sh.Quiet.Microseconds()
	switch {
	case tat > now:
		return sh.SharedLimit(b.Limit, n), marked, v
	case n < sh.Leases && quiet && !(v.leased && v.lease.Epoch == k):
		return sh.SharedLimit(b.Limit, sh.Leases), lease, v
	case !single:
		return sh.SharedLimit(b.Limit, n), marked, v
	case n >= sh.Leases:
		v.why = WroteFull
	case !quiet:
		v.why = WroteNotQuiet
	default:
		v.why = WroteHeld
	}
	return sh.SharedLimit(b.Limit, sh.Leases), whole, v
}

// shareInput adds to a grant's write in (from takeInput, form f) what form
// sf asserts and sets. It copies what it changes: takeInput's maps are
// shared.
func shareInput(in *dynamodb.UpdateItemInput, f form, sf shareForm, v shareView, sh Share, now int64) {
	names := maps.Clone(in.ExpressionAttributeNames)
	vals := maps.Clone(in.ExpressionAttributeValues)
	names["#nw"] = markAttribute
	next := ":next"
	if f == busy {
		next = "#tat + :nT"
	}
	set := ", #nw = " + next
	remove := ""
	var conds []string
	switch sf {
	case unmarked:
		// No count asserted: charged at the whole carve, whatever leases
		// there are.
		conds = append(conds, "(attribute_not_exists(#tat) OR attribute_not_exists(#nw) OR #nw <> #tat)")
		set += ", #ow = :now"
		names["#ow"] = unknownAttribute
	default:
		if !v.aged {
			conds = append(conds, "attribute_exists(#nw) AND #nw = #tat")
		}
		switch sf {
		case lease:
			// Charged at the whole carve: it asserts only that the epoch
			// has a lease left.
			names["#ck"], names["#sk"], names["#old"] = countAttribute(v.epoch), epochAttribute, countAttribute(v.epoch-2)
			vals[":k"], vals[":m"], vals[":zero"], vals[":one"] = num(v.epoch), num(int64(sh.Leases)), num(0), num(1)
			conds = append(conds, "(attribute_not_exists(#ck) OR #ck < :m)")
			set += ", #ck = if_not_exists(#ck, :zero) + :one, #sk = :k"
			remove = " REMOVE #old"
			if !v.aged {
				conds = append(conds, "#ow <= :quiet")
				names["#ow"] = unknownAttribute
				vals[":quiet"] = num(now - sh.Quiet.Microseconds())
			}
		case marked:
			// Charged at the carve of v.n leases: it asserts that no more
			// are taken in the epoch (fewer only overcharge it).
			names["#ck"] = countAttribute(v.epoch)
			vals[":sn"] = num(int64(v.n))
			conds = append(conds, "(attribute_not_exists(#ck) OR #ck <= :sn)")
		}
	}
	// The item outlives the epoch: its carve holds until every lease of
	// the epoch has run out.
	ttl, _ := strconv.ParseInt(vals[":ttl"].(*types.AttributeValueMemberN).Value, 10, 64)
	vals[":ttl"] = num(max(ttl, ttlSeconds(sh.EpochEnd(sh.EpochOf(now)))))
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = names, vals
	in.UpdateExpression = aws.String(*in.UpdateExpression + set + remove)
	if len(conds) > 0 {
		in.ConditionExpression = aws.String("(" + *in.ConditionExpression + ") AND " + strings.Join(conds, " AND "))
	}
}
