package gcra

import "testing"

// NextProbation puts a bucket on probation only when the vendor refuses
// one of its first slots after a silence, doubles the spacing while that
// goes on, keeps it through other refusals within it, and forgets it
// after a refusal that says nothing about the rate.
func TestNextProbation(t *testing.T) {
	l := Limit{Rate: 10, Burst: 1} // T = 100 ms
	const s = int64(1e6)
	none := Probation{}
	on := func(spacing, until int64) Probation { return Probation{Spacing: spacing, Until: until} }
	tests := []struct {
		name          string
		p             Probation
		silence, slot int64
		tokens        int
		now, until    int64
		want          Probation
	}{
		{"first refusal ever: one request among many", none, 0, 10 * s, 1, 10 * s, 12 * s, none},
		{"slot unknown: nothing learned", on(2, 100*s), 10 * s, 0, 1, 11 * s, 13 * s, on(2, 100*s)},
		{"slot before the last silence ended: that overload's", none, 10 * s, 9 * s, 1, 10 * s, 12 * s, none},
		{"second request after the silence refused: spacing 2, a minute past the silence",
			none, 10 * s, 10*s + 200_000, 1, 10*s + 300_000, 12 * s, on(2, 72*s)},
		{"fourth request after it: not among the first three", none, 10 * s, 10*s + 300_000, 1, 10*s + 400_000, 12 * s, none},
		{"the first request of 14 tokens, 1.4 s after it (seed 1802)", none, 10 * s, 11*s + 400_000, 14, 11*s + 500_000, 13 * s, on(2, 73*s)},
		{"the fourth request of 14 tokens", none, 10 * s, 14*s + 200_000, 14, 14*s + 300_000, 16 * s, none},
		{"refused right after a silence within a probation: doubles",
			on(2, 100*s), 10 * s, 10*s + 500_000, 1, 10*s + 600_000, 25 * s, on(4, 85*s)},
		{"doubling stops at MaxSpacing", on(MaxSpacing, 100*s), 10 * s, 10*s + 100_000, 1, 10*s + 200_000, 25 * s, on(MaxSpacing, 85*s)},
		{"refused later within a probation: kept, and lengthened", on(4, 100*s), 10 * s, 50 * s, 1, 50 * s, 52 * s, on(4, 112*s)},
		{"refused right after the probation ended: kept", on(4, 100*s), 10 * s, 100*s + 1_000_000, 1, 100*s + 1_000_000, 102 * s, on(4, 162*s)},
		{"refused long after the probation ended: forgotten", on(4, 100*s), 10 * s, 200 * s, 1, 200 * s, 202 * s, none},
		{"a 15-minute silence holds its probation four times as long", none, 10 * s, 10*s + 100_000, 1, 10*s + 100_000, 10*s + 100_000 + 900*s, on(2, 10*s+100_000+900*s+3600*s)},
		{"and no longer than four hours", none, 10 * s, 10*s + 100_000, 1, 10*s + 100_000, 10*s + 100_000 + 86400*s, on(2, 10*s+100_000+86400*s+4*3600*s)},
	}
	for _, tt := range tests {
		got := NextProbation(tt.p, tt.silence, tt.slot, tt.tokens, tt.now, tt.until, l)
		if got != tt.want {
			t.Errorf("%s: NextProbation = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// A bucket on probation admits each grant by its own tolerance and
// charges it the spaced time, so whatever mix of spaced and plain grants
// its workers make (each knowing the probation or not), no window holds
// more than burst + rate·W slots. The oracle counts slots in windows,
// from the decisions alone.
func TestSpacedGrantsStayWithinTheBucket(t *testing.T) {
	for _, l := range []Limit{{Rate: 10, Burst: 1}, {Rate: 10, Burst: 3}, {Rate: 2, Burst: 5}} {
		T := l.Interval()
		var slots []int64
		tat, now := int64(0), int64(1e6)
		for i := range 400 {
			f := []int64{1, 2, 4, 1, 8}[i%5]
			ch := ChargeOf(l, 1, f, false, 0)
			d := Decide(tat, now, l, ch.Span, 0)
			if d.Allowed {
				old := max(tat, now)
				tat = old + ch.Charge
				slots = append(slots, max(old+int64(ch.Span)*T-l.Tolerance(), now))
			}
			now += T / 3
		}
		for i := range slots {
			for w := int64(0); w <= 20*T; w += T / 2 {
				n := 0
				for _, s := range slots[i:] {
					if s < slots[i]+w {
						n++
					}
				}
				if max := float64(l.Burst) + l.Rate*float64(w)/1e6; float64(n) > max {
					t.Fatalf("%+v: %d slots in a window of %d µs from %d, want at most %.1f", l, n, w, slots[i], max)
				}
			}
		}
	}
}

// A batch on probation: its slots are f intervals apart, as many as fit
// within maxDelay, and the charge leaves tat f intervals past its last.
func TestSpreadBatch(t *testing.T) {
	l := Limit{Rate: 10, Burst: 1} // T = 100 ms, τ = 100 ms
	now := int64(10e6)
	k := SpreadFit(now, now, l, 5, 2, 500_000)
	if k != 3 {
		t.Fatalf("SpreadFit = %d, want 3 (slots at +0, +200, +400 ms within 500 ms)", k)
	}
	ch := ChargeOf(l, k, 2, true, 500_000)
	if ch.Span != 5 || ch.Charge != 600_000 || ch.F != 2 {
		t.Fatalf("ChargeOf = %+v, want span 5, charge 600 ms, f 2", ch)
	}
	got := SpreadSlots(now+ch.Charge, now, l, k, ch.F, ch.Charge)
	want := []int64{now, now + 200_000, now + 400_000}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("SpreadSlots = %v, want %v", got, want)
		}
	}
	// A whole batch the spacing could never fit is spread less, not refused.
	if ch := ChargeOf(l, 4, 8, true, 500_000); ch.F != 1 {
		t.Fatalf("ChargeOf(4 requests, f 8, within 500 ms) = %+v, want f lowered to 1 (5 slots' room)", ch)
	}
}
