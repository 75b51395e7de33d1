package gcra

// MultiDecision is the outcome of one request for n tokens from each of
// several buckets at once: granted by all of them, or by none.
type MultiDecision struct {
	// Allowed reports whether every bucket conforms.
	Allowed bool
	// Slot is, when allowed, the common slot: the latest of the buckets'
	// own slots, never earlier than now. The caller spends at Slot, so
	// every bucket is charged n tokens there, as a request arriving at
	// Slot: tat_i := max(tat_i, Slot) + n·T_i. Charged at now instead, a
	// bucket whose own slot is earlier would see its tokens spent after
	// its slots, and its window at arrival hold up to burst + rate·(W +
	// the lag). A bucket whose own slot is earlier forgoes its refill
	// until Slot.
	Slot int64
	// Binding is the index of the bucket that decides: when allowed, the
	// first whose own slot is Slot; when denied, the first whose wait is
	// RetryAfter.
	Binding int
	// RetryAfter is, when denied, the maximum of the denying buckets'
	// RetryAfter: the request conforms at now+RetryAfter in every bucket
	// (a bucket that conforms at some time conforms at every later one
	// while its tat stays), and not before in the binding one.
	RetryAfter int64
	// Bounds[i] is, when allowed, the highest tat bucket i may hold before
	// the write and still have its own slot no later than Slot:
	// Slot + τ_i − n·T_i. A guarded write bounded by it never leaves a
	// bucket's slot after the common one, however stale the tats passed
	// in were. It is ≥ tats[i] for every bucket.
	Bounds []int64
}

// DecideMulti applies a request for n tokens from every bucket, willing to
// wait up to maxDelay µs for the common slot, to buckets whose stored tats
// are tats[i] under limits[i], at time now. tats and limits have the same
// length, at least one; the caller has checked each (limit, n, maxDelay)
// with Check.
func DecideMulti(tats []int64, now int64, limits []Limit, n int, maxDelay int64) MultiDecision {
	var md MultiDecision
	slot := now
	for i, l := range limits {
		d := Decide(tats[i], now, l, n, maxDelay)
		switch {
		case !d.Allowed && d.RetryAfter > md.RetryAfter:
			md.RetryAfter, md.Binding = d.RetryAfter, i
		case d.Allowed && md.RetryAfter == 0 && d.Slot > slot:
			slot, md.Binding = d.Slot, i
		}
	}
	if md.RetryAfter > 0 {
		return md
	}
	md.Allowed, md.Slot = true, slot
	md.Bounds = make([]int64, len(limits))
	for i, l := range limits {
		md.Bounds[i] = slot + l.Tolerance() - int64(n)*l.Interval()
	}
	return md
}
