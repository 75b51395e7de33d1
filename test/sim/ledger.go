package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// The ledger is the simulation's oracle: what the PMS published and what
// each OTA holds, day by day, kept with its own arithmetic (nothing here
// reads the SDK's state). Rows are dense arrays of days from day0, so a
// fleet of millions of (cell, date)s fits in memory.

// day0 is the first date a change may touch; horizon the number of days.
var day0 = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

const horizon = 400

var (
	kindNames = []string{"availability", "rates", "restrictions"}
	roomNames = []string{"DBL", "TWN", "STE", "SGL", "FAM"}
	// The live load draws the first two plans; an onboarding hotel's
	// resync covers all four (Onboard).
	planNames = []string{"BAR", "NRF", "PKG", "CORP"}
)

// rowKey names a (property, kind, room type, rate plan); inside the
// ledger also a block of blockDays days, so that memory follows the days
// a run touches rather than the horizon.
type rowKey struct {
	prop             int32
	kind, room, plan uint8
	block            uint8
}

const blockDays = 32

// at is the block of day d of k and d's place in it.
func at(k rowKey, d int) (rowKey, int) {
	k.block = uint8(d / blockDays)
	return k, d % blockDays
}

// truthRow is what the PMS published for a row: per day the newest
// sequence, its value and when it was published (ns since the run began).
type truthRow struct {
	seq, val []int32
	pubAt    []int64
}

// heldRow is what one OTA holds for a row: the last push of each day wins.
type heldRow struct {
	seq, val []int32
	// least is, for a vendor that receives values alone (a wire format),
	// the least sequence the OTA's history of each day can have reached
	// (acceptWire); nil until such a push: seq is then known.
	least []int32
}

// laneKey is one lane as the ledger sees it: a (property, kind, channel).
type laneKey struct {
	prop int32
	kind uint8
	ch   uint8
}

// Ledger holds the truth, every OTA's copy and the freshness samples.
type Ledger struct {
	mu       sync.Mutex
	start    time.Time
	channels []string
	carries  [][3]bool // per channel, whether it has each kind's endpoint
	truth    map[rowKey]*truthRow
	held     []map[rowKey]*heldRow // per channel
	stale    map[laneKey]int       // days of a lane whose OTA copy is behind
	// Fresh holds, per minute of the run, how long a day's newest value
	// took to reach an OTA.
	Fresh []*Hist
	// Urgent holds how long stop-sells (availability value 0) took.
	Urgent   Hist
	Changes  int
	Days     int
	Accepted int // days OTAs accepted
	// WentBack counts accepted days whose sequence was older than the one
	// the OTA held: an older state overwrote a newer one (the product
	// promises it never does), and WentBackExample names the first.
	WentBack        int
	WentBackExample string
	// slow, if set, keeps the slowest days of each minute (lanetrace.go).
	slow *slowest
	// wire, if set, keeps each day's published history (ota_formats.go);
	// exempt, if set, names days Stale leaves out (a change the vendor
	// refused, dead-lettered with its reason).
	wire   wireLedger
	exempt func(copyOf int, k rowKey) bool
	// exemptDay, if set, names single days Stale leaves out, by what the
	// OTA holds of them (a hand edit no parity check could see).
	exemptDay func(copyOf int, k rowKey, d int, held int32) bool
	// excuse, if set, names single days Stale leaves out, by when their
	// newest value was published (adversary_parts_wiring.go).
	excuse func(copyOf int, k rowKey, pubAt time.Duration) bool
	// Excused counts the stale days excuse left out.
	Excused int
	// seeded marks, per row block, the days whose newest value an
	// onboarding hotel's stored state holds and only a resync delivers:
	// their delivery goes to Onboard, not to Fresh, and OnboardLast is
	// when the last of them arrived.
	seeded      map[rowKey]uint32
	Onboard     Hist
	OnboardLast time.Duration
}

// NewLedger is an empty ledger for the channels, in order.
func NewLedger(start time.Time, channels []string, carries [][3]bool) *Ledger {
	l := &Ledger{start: start, channels: channels, carries: carries, truth: map[rowKey]*truthRow{}, stale: map[laneKey]int{}}
	for range channels {
		l.held = append(l.held, map[rowKey]*heldRow{})
	}
	return l
}

// Publish records a change the PMS sent: days [from, from+n) of row k now
// have value v at sequence seq.
func (l *Ledger) Publish(k rowKey, from, n int, seq, v int32) { l.publish(k, from, n, seq, v, false) }

// Seed records state the store held before the hotel was connected: no
// OTA holds it until a resync sends it.
func (l *Ledger) Seed(k rowKey, from, n int, seq, v int32) { l.publish(k, from, n, seq, v, true) }

func (l *Ledger) publish(k rowKey, from, n int, seq, v int32, seed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Changes++
	now := int64(time.Since(l.start))
	for day := from; day < from+n; day++ {
		bk, d := at(k, day)
		t := l.truth[bk]
		if t == nil {
			t = &truthRow{seq: make([]int32, blockDays), val: make([]int32, blockDays), pubAt: make([]int64, blockDays)}
			l.truth[bk] = t
		}
		if seq <= t.seq[d] {
			continue
		}
		l.Days++
		for ch := range l.channels {
			if l.carries[ch][k.kind] && l.fresh(ch, bk, t, d) { // it is behind once the truth moves on
				l.stale[laneKey{k.prop, k.kind, uint8(ch)}]++
			}
		}
		t.seq[d], t.val[d], t.pubAt[d] = seq, v, now
		if seed {
			if l.seeded == nil {
				l.seeded = map[rowKey]uint32{}
			}
			l.seeded[bk] |= 1 << d
		} else if l.seeded[bk]&(1<<d) != 0 {
			l.seeded[bk] &^= 1 << d // a live change's now
		}
		if l.wire != nil {
			l.wire.publish(bk, d, seq, v)
		}
	}
}

// wentBack says whether a push of day d at sequence seq went back (over:
// the sequence it went back from), and moves the day's least sequence on.
// With could (a wire format's value, which may be any of several
// sequences), the day's history at the OTA went back only if no choice of
// one sequence per value is non-decreasing: the least sequence at or past
// the last least one decides it, and keeps every later choice open.
// Naming each value by its newest sequence alone took an older change's
// value for a later one's that repeated it (adversary seed 1149:
// restrictions 9 at change 73 and at 158, 302 at 142; the pushes carried
// 73's, then 142's, read as 158 then 142).
func (h *heldRow) wentBack(d int, seq int32, could []int32) (bool, int32) {
	if could == nil {
		if h.least != nil {
			h.least[d] = seq
		}
		return seq < h.seq[d], h.seq[d]
	}
	if h.least == nil {
		h.least = slices.Clone(h.seq)
	}
	was, next := h.least[d], int32(math.MaxInt32)
	for _, s := range could {
		if s >= was {
			next = min(next, s)
		}
	}
	if next == math.MaxInt32 {
		h.least[d] = slices.Min(could)
		return true, was
	}
	h.least[d] = next
	return false, was
}

// fresh says whether channel ch holds day d of row k at the newest sequence.
func (l *Ledger) fresh(ch int, k rowKey, t *truthRow, d int) bool {
	h := l.held[ch][k]
	if h == nil {
		return t.seq[d] == 0
	}
	return h.seq[d] >= t.seq[d]
}

// Accept records an OTA's accepted push of one day, at sequence seq.
func (l *Ledger) Accept(ch int, k rowKey, day int, seq, v int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.accept(ch, k, day, seq, v, nil)
}

// accept records day's push of value v at sequence seq; could, if not
// nil, are the sequences v can be (a wire format's push carries no
// sequence: acceptWire), seq the newest of them.
func (l *Ledger) accept(ch int, k rowKey, day int, seq, v int32, could []int32) {
	l.Accepted++
	k, d := at(k, day)
	h := l.held[ch][k]
	if h == nil {
		h = &heldRow{seq: make([]int32, blockDays), val: make([]int32, blockDays)}
		l.held[ch][k] = h
	}
	t := l.truth[k]
	wasFresh := t == nil || h.seq[d] >= t.seq[d]
	if back, over := h.wentBack(d, seq, could); back {
		if l.WentBack++; l.WentBackExample == "" {
			l.WentBackExample = fmt.Sprintf("%s p%05d kind %d room %d plan %d day %d: seq %d over %d at %v",
				l.channels[ch], k.prop, k.kind, k.room, k.plan, int(k.block)*blockDays+d, seq, over, time.Since(l.start))
		}
	}
	h.seq[d], h.val[d] = seq, v
	if t == nil {
		return
	}
	isFresh := h.seq[d] >= t.seq[d]
	lk := laneKey{k.prop, k.kind, uint8(ch)}
	switch {
	case !wasFresh && isFresh:
		l.stale[lk]--
		if l.stale[lk] == 0 {
			delete(l.stale, lk)
		}
		now := time.Since(l.start)
		if l.seeded[k]&(1<<d) != 0 {
			l.Onboard.Add(now - time.Duration(t.pubAt[d]))
			l.OnboardLast = max(l.OnboardLast, now)
			break
		}
		l.hist(now).Add(now - time.Duration(t.pubAt[d]))
		if l.slow != nil && now-time.Duration(t.pubAt[d]) > slowFrom {
			l.slow.add(slowDay{ch: ch, prop: k.prop, kind: k.kind, room: k.room, plan: k.plan, day: int(k.block)*blockDays + d,
				seq: t.seq[d], published: time.Duration(t.pubAt[d]), accepted: now})
		}
		if k.kind == 0 && v == 0 {
			l.Urgent.Add(now - time.Duration(t.pubAt[d]))
		}
	case wasFresh && !isFresh:
		// An older push overtook a newer one: the OTA went back.
		l.stale[lk]++
	}
}

func (l *Ledger) hist(at time.Duration) *Hist {
	m := int(at / time.Minute)
	for len(l.Fresh) <= m {
		l.Fresh = append(l.Fresh, &Hist{})
	}
	return l.Fresh[m]
}

// DirtyLanes counts the lanes some OTA is behind on, per (channel, kind).
func (l *Ledger) DirtyLanes() map[[2]uint8]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[[2]uint8]int{}
	for lk := range l.stale {
		out[[2]uint8{lk.ch, lk.kind}]++
	}
	return out
}

// maxItems is the syncer's default items per push (config.DefaultMaxItems,
// repeated: the oracle reads nothing of the SDK).
const maxItems = 500

// Floor is the quota-bound floor: per bucket (channel, kind, credential of
// the property), the pushes its dirty lanes still need (a lane's stale
// days in pushes of maxItems) at the bucket's rate; the largest over the
// buckets, and how many lanes are dirty.
func (l *Ledger) Floor(credOf func(ch int, prop int32) int32, rate func(ch int) float64) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pushes := map[[3]int32]int{}
	for lk, days := range l.stale {
		pushes[[3]int32{int32(lk.ch), int32(lk.kind), credOf(int(lk.ch), lk.prop)}] += (days + maxItems - 1) / maxItems
	}
	floor := time.Duration(0)
	for b, n := range pushes {
		floor = max(floor, time.Duration(float64(n)/rate(int(b[0]))*float64(time.Second)))
	}
	return floor, len(l.stale)
}

// DirtyByProp counts dirty lanes per (channel, kind, property).
func (l *Ledger) DirtyByProp() map[laneKey]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[laneKey]int, len(l.stale))
	for lk, n := range l.stale {
		out[lk] = n
	}
	return out
}

// Stale lists (up to max) days where an OTA's value differs from the
// newest PMS value, and counts them all.
func (l *Ledger) Stale(max int) (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	var ex []string
	keys := make([]rowKey, 0, len(l.truth))
	for k := range l.truth {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.prop != b.prop {
			return a.prop < b.prop
		}
		return uint32(a.kind)<<24|uint32(a.room)<<16|uint32(a.plan)<<8|uint32(a.block) < uint32(b.kind)<<24|uint32(b.room)<<16|uint32(b.plan)<<8|uint32(b.block)
	})
	for _, k := range keys {
		t := l.truth[k]
		for ch := range l.channels {
			if !l.carries[ch][k.kind] || l.exempt != nil && l.exempt(ch, k) {
				continue
			}
			h := l.held[ch][k]
			for d := range blockDays {
				if t.seq[d] == 0 {
					continue
				}
				var hv, hs int32
				if h != nil {
					hv, hs = h.val[d], h.seq[d]
				}
				if hv != t.val[d] && l.excuse != nil && l.excuse(ch, k, time.Duration(t.pubAt[d])) {
					l.Excused++
					continue
				}
				if hv != t.val[d] && (l.exemptDay == nil || !l.exemptDay(ch, k, d, hv)) {
					n++
					if len(ex) < max {
						ex = append(ex, fmt.Sprintf("%s p%d %s %s/%s %s: OTA holds %d (seq %d), PMS newest %d (seq %d)", l.channels[ch], k.prop,
							kindNames[k.kind], roomNames[k.room], planNames[k.plan], day0.AddDate(0, 0, int(k.block)*blockDays+d).Format("2006-01-02"), hv, hs, t.val[d], t.seq[d]))
					}
				}
			}
		}
	}
	return n, ex
}

// Hist is a log-bucketed latency histogram (2% wide buckets from 1 ms).
type Hist struct {
	counts []int
	n      int
	max    time.Duration
}

const histBase = 1.02

func (h *Hist) Add(d time.Duration) {
	ms := max(float64(d)/float64(time.Millisecond), 1)
	i := int(math.Log(ms) / math.Log(histBase))
	for len(h.counts) <= i {
		h.counts = append(h.counts, 0)
	}
	h.counts[i]++
	h.n++
	h.max = max(h.max, d)
}

// Merge adds o's samples to h.
func (h *Hist) Merge(o *Hist) {
	for len(h.counts) < len(o.counts) {
		h.counts = append(h.counts, 0)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Quantile is the q-th quantile (upper bucket edge), 0 with no samples.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	want := int(math.Ceil(q * float64(h.n)))
	seen := 0
	for i, c := range h.counts {
		seen += c
		if seen >= want {
			return min(time.Duration(math.Pow(histBase, float64(i+1))*float64(time.Millisecond)), h.max)
		}
	}
	return h.max
}

// N is the number of samples; Max the largest.
func (h *Hist) N() int             { return h.n }
func (h *Hist) Max() time.Duration { return h.max }
