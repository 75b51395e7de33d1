package sim

import (
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"
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

// profileCPU writes a CPU profile of the run's first wall-clock minute to
// FLEETBUCKET_SIM_CPUPROFILE, if set: where a full run spends its time.
// Call it outside the synctest bubble.
func profileCPU() (stop func()) {
	path := os.Getenv("FLEETBUCKET_SIM_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil || pprof.StartCPUProfile(f) != nil {
		return func() {}
	}
	var once sync.Once
	stop = func() { once.Do(func() { pprof.StopCPUProfile(); _ = f.Close() }) }
	// Called outside the synctest bubble: a real minute.
	time.AfterFunc(time.Minute, stop)
	return stop
}
