package sim

import (
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
)

// The burst demo (scripts/demo.sh -events 600 -duration 5s) on a store as
// slow as the emulator under it: every DynamoDB call answers in 300–500 ms
// (p50 300 ms, p99 500 ms), against the demo's 500 ms margin. A push that
// reaches its slot past its grace leaves the slot unused and books a fresh
// token; when the claim and the render run between the slot and the send,
// most pushes did (41–52% of the demo's pushes on the emulator). Prepared
// before the slot, only the send waits for it: at most 10% of pushes
// waste a slot, with no 429 and no window over the vendor's limit (the
// scenario's invariants).
func TestBurstOnASlowStoreWastesFewSlots(t *testing.T) {
	tests := []struct {
		name string
		db   Latency
		// serve, if > 0, makes the store one server that works on one call
		// at a time (Scenario.DBServe), as the demo's single-threaded
		// emulator does; the wire formats are the demo's then.
		serve time.Duration
		// wasted is the most wasted slots per push; 0: no bound. A store
		// far slower than the margin wastes slots whatever the pipeline
		// does, and must still bring every change to the OTA, each job
		// deferred a bounded number of times.
		wasted float64
	}{
		{"300-500ms", Latency{P50: 300 * time.Millisecond, P99: 500 * time.Millisecond}, 0, 0.10},
		{"far slower than the margin", Latency{P50: 1500 * time.Millisecond, P99: 4 * time.Second}, 0, 0},
		// The demo's emulator: one thread at about 7 ms a call, whose
		// answers take as long as the calls queued before them (the demo
		// measured p50 170–280 ms). The burst's 1,100–1,300 calls keep it
		// busy for 8–9 s, which bounds the freshness (p99 7.6–9.0 s over
		// seeds 1–5, as the demo's 8.2 s), and the answers' lateness
		// wastes 4–11% of the slots.
		{"one server at 7 ms a call", Latency{P50: 2 * time.Millisecond, P99: 10 * time.Millisecond}, 7 * time.Millisecond, 0.15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A bounded row counts the wasted slots of six seeds together:
			// one run's share moves by a few slots from replay to replay
			// (goroutine order, which other packages running beside it
			// change), six runs' much less. Three summed 12 of 109 pushes
			// (11%) once in a fresh-clone CI of e8db0f1, under 10% in 52
			// quiet runs.
			first, runs := testSeed(t), 1
			if tt.wasted > 0 {
				runs = 6
			}
			var wasted, pushes int
			for seed := first; seed < first+uint64(runs); seed++ {
				st := burstOnSlowStore(t, seed, tt.db, tt.serve)
				wasted, pushes = wasted+st.Wasted, pushes+st.Pushes
			}
			share := float64(wasted) / float64(pushes)
			t.Logf("%d wasted slots in %d pushes (%.1f%%)", wasted, pushes, 100*share)
			if tt.wasted > 0 && share > tt.wasted {
				t.Errorf("seeds %d-%d: %d wasted slots in %d pushes (%.0f%%), want at most %.0f%%", first, first+uint64(runs)-1, wasted, pushes, 100*share, 100*tt.wasted)
			}
		})
	}
}

// burstOnSlowStore runs the burst on a store answering at db (one server
// at serve a call, if serve > 0) and checks what each run must hold.
func burstOnSlowStore(t *testing.T, seed uint64, db Latency, serve time.Duration) Stats {
	t.Helper()
	sc := calibrate()
	sc.Name, sc.Seed = "burst-slow-store", seed
	sc.Load.Duration = 5 * time.Second
	sc.Load.Rate = func(time.Duration) float64 { return 120 } // 600 changes in 5 s
	sc.DBLatency, sc.DBServe = db, serve
	if serve > 0 {
		sc.Channels[0].Vendor.Wire = &WireSpec{Format: "opentravel"}
		sc.Channels[1].Vendor.Wire = &WireSpec{Format: "expedia-ar"}
	}
	rep := runChecked(t, sc, nil)
	st := rep.Stats
	if st.Changes < 500 || st.Pushes == 0 || rep.Accepted == 0 {
		t.Fatalf("seed %d: %d changes, %d pushes, %d accepted; want the burst's ~600 changes pushed", seed, st.Changes, st.Pushes, rep.Accepted)
	}
	if rep.Throttled != 0 {
		t.Errorf("seed %d: %d 429s, want 0", seed, rep.Throttled)
	}
	// A job begun for a slot it then missed is pushed on a fresh token,
	// not booked and deferred again: on a store this slow every slot
	// would be missed, and the job loop through the queue (84 deferrals
	// for 49 pushes did, against 32 for 49).
	if deferred := st.Outcomes[dispatch.Deferred]; 2*deferred > 3*st.Pushes {
		t.Errorf("seed %d: %d deferrals for %d pushes, want at most 1.5 a push: jobs loop through the queue", seed, deferred, st.Pushes)
	}
	return st
}
