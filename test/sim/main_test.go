package sim

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain collects garbage less often than Go's default, as
// scripts/sim.sh does (GOGC=400), unless GOGC is set: every store call of
// the simulation copies items, and at the default the collector took a
// sixth of an adversary case's CPU. The whole package then peaks at about
// 1.2 GB resident, against 0.5 GB at the default.
func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(400)
	}
	os.Exit(m.Run())
}
