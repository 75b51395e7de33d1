package sim

import (
	"slices"
	"time"
)

// oneProperty is the small scenario a test of one case starts from: one
// property on one credential of booking_com (5/s, burst 5), a lane for
// each kind given (availability if none), a change a second for 2 s over
// up to 3 days within 20 of one room and plan, one worker a queue, the
// emulators' latencies (calibrate), a 30-minute drain with a sweep every 5
// minutes, and the lanes' items checked. The test sets what its case is
// about (the vendor, the faults, the load, the drain) on the value.
func oneProperty(name, note string, kinds ...string) Scenario {
	if len(kinds) == 0 {
		kinds = []string{"availability"}
	}
	var weights [3]float64
	for i, k := range allKinds() {
		if slices.Contains(kinds, k) {
			weights[i] = 1
		}
	}
	return Scenario{
		Name: name, Seed: 1, Properties: 1, Note: note,
		Channels: []ChannelSpec{{Name: "booking_com", Kinds: kinds, Creds: 1, Rate: 5, Burst: 5}},
		Load: Load{Duration: 2 * time.Second, Rate: func(time.Duration) float64 { return 1 }, Kinds: weights,
			MaxDays: 3, WithinDays: 20, Rooms: 1, Plans: 1},
		DBLatency:      Latency{P50: 52 * time.Millisecond, P99: 170 * time.Millisecond},
		SQSLatency:     Latency{P50: 8 * time.Millisecond, P99: 40 * time.Millisecond},
		OTALatency:     Latency{P50: 2 * time.Millisecond, P99: 10 * time.Millisecond},
		MaxConcurrency: 1, Drain: 30 * time.Minute, SweepEvery: 5 * time.Minute, MemoryGB: 0.25,
		CheckItems: true,
	}
}
