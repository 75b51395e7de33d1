package sim

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// memWatch records the run's peak heap, the figure that decides whether a
// scenario fits the machine. With FLEETBUCKET_SIM_HEAPPROFILE set it also
// writes a heap profile there at each new peak (20% over the last), to find
// what holds the memory.
type memWatch struct {
	peak, profiled uint64
}

func (m *memWatch) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse <= m.peak {
		return
	}
	m.peak = ms.HeapInuse
	path := os.Getenv("FLEETBUCKET_SIM_HEAPPROFILE")
	if path == "" || m.peak < m.profiled+m.profiled/5 {
		return
	}
	m.profiled = m.peak
	if f, err := os.Create(path); err == nil {
		_ = pprof.WriteHeapProfile(f)
		_ = f.Close()
	}
}
