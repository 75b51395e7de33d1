package gcra

// Probation is how a bucket of fixed rate paces itself after the vendor
// refused it again right after a silence it had asked for: until Until (µs)
// its slots are Spacing intervals apart, and each token it grants is
// charged Spacing intervals of the bucket's time.
//
// Why: a 429 asks for a silence, and a bucket whose configured rate is
// above what the vendor now gives (a vendor that halved its limit, one
// whose concurrency cap the config does not name) comes out of each
// silence at that rate, and the vendor refuses one of its first requests
// and asks for the next silence. With a long Retry-After (a day, which a
// client clamps to 15 minutes), the bucket then sends one request a
// silence, for as long as the vendor stays lower (adversary seeds 643, 1389
// and 1802: days of backlog). An adaptive bucket learns the lower rate; a
// fixed one must not exceed its configured rate, and need not reach it
// while the vendor refuses it: probation only slows it, so the fleet's
// bound (burst + rate·W in any window W) holds in every mix of spaced and
// unspaced grants (each token is admitted by the bucket's own tolerance,
// and its charge only pushes tat further).
type Probation struct {
	Spacing int64 // ≥ 1; 0 and 1 both mean none
	Until   int64 // µs
}

// MaxSpacing is the most a probation slows a bucket: 1/32 of its rate.
const MaxSpacing = 32

// probationSoon is how many of a bucket's first requests after a silence,
// at its spacing then, a refusal must come within to count as the vendor
// refusing the rate itself rather than one request of many: a bucket
// comes out of a silence empty, so a request of n tokens comes n intervals
// after the one before it (seed 1802: 14 tokens a push on an items
// endpoint, the first push after each silence refused 1.4 s after it).
const probationSoon = 3

// Probation lasts probationFor times the silence that starts it, within
// [minProbation, maxProbation]: a refusal costs its silence, and a
// slower rate held for a few silences' time costs at most half of that.
const (
	probationFor = 4
	minProbation = int64(60e6)
	maxProbation = int64(4 * 3600e6)
)

// Factor is the spacing in force at now: 1 outside a probation.
func (p Probation) Factor(now int64) int64 {
	if p.Spacing > 1 && now < p.Until {
		return p.Spacing
	}
	return 1
}

// NextProbation is the probation after the vendor refused a request of
// tokens tokens sent at slot (µs; 0 when unknown) with a silence until
// `until`, decided at
// now on what the bucket recorded before: its probation p and the end of
// its last silence, silence (0 for none).
//   - A refusal of one of the first slots after that silence (probationSoon
//     of them at the spacing in force then) means the rate itself is
//     refused: the spacing doubles from what was in force (2 from none),
//     up to MaxSpacing.
//   - A refusal within a probation, or of one of the first slots after it
//     ended, keeps its spacing: the vendor still wants it.
//   - Any other refusal is one request among many: no probation.
//   - A refusal of a slot before the last silence ended belongs to the
//     overload that silence answered, as does one whose slot is unknown:
//     p is kept as it is.
//
// A probation that goes on lasts from until for a multiple of the silence.
func NextProbation(p Probation, silence, slot int64, tokens int, now, until int64, l Limit) Probation {
	if slot <= 0 || slot < silence {
		return p
	}
	T := l.Interval() * int64(max(tokens, 1))
	inForce := p.Factor(slot)
	soon := func(from, spacing int64) bool {
		return from > 0 && slot < from+probationSoon*spacing*T
	}
	var spacing int64
	switch {
	case soon(silence, inForce):
		spacing = min(2*inForce, MaxSpacing)
	case inForce > 1:
		spacing = inForce
	case p.Spacing > 1 && slot >= p.Until && soon(p.Until, p.Spacing):
		spacing = p.Spacing
	default:
		return Probation{}
	}
	return Probation{Spacing: spacing, Until: until + min(max(probationFor*(until-now), minProbation), maxProbation)}
}

// Charged is how a grant of n tokens is charged on a bucket spacing its
// slots f intervals apart (f ≤ 1: none). requests says whether the tokens
// are n requests (a batch, whose slots are f intervals apart) or one
// request's cost (admitted as n tokens are without probation). Span is the
// time from the first token's refill to the last slot's, in intervals (the
// n a plain Decide is asked for), Charge the bucket's time the grant
// takes, in µs (what tat advances by), and F the factor it was spread at.
type Charged struct {
	Span   int
	Charge int64
	F      int64
}

// ChargeOf is the spread of n tokens at factor f on limit l, with the
// factor lowered (halved down to 1) until a bucket could ever grant it
// within maxDelay: a probation slows a request, never refuses it for good.
func ChargeOf(l Limit, n int, f int64, requests bool, maxDelay int64) Charged {
	for ; f > 1; f /= 2 {
		span := n
		if requests {
			span = 1 + (n-1)*int(f)
		}
		if Check(l, span, maxDelay) == nil {
			return Charged{Span: span, Charge: int64(n) * f * l.Interval(), F: f}
		}
	}
	return Charged{Span: n, Charge: int64(n) * l.Interval(), F: 1}
}

// SpreadFit is Fit for a batch of requests f intervals apart: how many of n
// fit within maxDelay when the first is one interval after max(tat, now)
// less the tolerance and each next one f intervals later.
func SpreadFit(tat, now int64, l Limit, n int, f, maxDelay int64) int {
	m := Fit(tat, now, l, 1+(n-1)*int(max(f, 1)), maxDelay)
	if m == 0 || f <= 1 {
		return min(m, n)
	}
	return min(1+(m-1)/int(f), n)
}

// SpreadSlots lists the k slots of a batch whose write left tat at newTAT
// after a charge of charge µs, its slots f intervals apart: slot i is one
// interval plus i·f intervals after the tat it started from, less the
// tolerance, and none is earlier than now. With f = 1 these are Slots'.
func SpreadSlots(newTAT, now int64, l Limit, k int, f, charge int64) []int64 {
	T := l.Interval()
	from := newTAT - charge
	slots := make([]int64, k)
	for i := range slots {
		slots[i] = max(from+(1+int64(i)*max(f, 1))*T-l.Tolerance(), now)
	}
	return slots
}
