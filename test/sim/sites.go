package sim

import (
	"runtime"
	"strings"
	"sync"
)

// Call sites: which code path of the SDK issued a store call, so the
// report can say what each state write and limiter write per change pays
// for. A site is the outermost function of the first SDK package on the
// stack (the store's method: lane.(*Store).Claim, ari.(*Store).applyMonth,
// limiter.(*Limiter).ReserveBatch) and the first function of another SDK
// package that called it (syncer.(*Syncer).Claim, dispatch...).

var sites sync.Map // [stackDepth]uintptr → string

const stackDepth = 32

// callSite names the SDK code path of the store call in progress.
func callSite() string {
	var pcs [stackDepth]uintptr
	n := runtime.Callers(3, pcs[:])
	if v, ok := sites.Load(pcs); ok {
		return v.(string)
	}
	frames := runtime.CallersFrames(pcs[:n])
	var store, storePkg, caller string
	for {
		f, more := frames.Next()
		if i := strings.Index(f.Function, "/sdk/"); i >= 0 {
			short := f.Function[strings.LastIndex(f.Function, "/")+1:]
			pkg, _, _ := strings.Cut(short, ".")
			switch {
			case storePkg == "" || pkg == storePkg:
				store, storePkg = trimClosure(short), pkg
			case caller == "":
				caller = trimClosure(short)
			}
		}
		if !more || caller != "" {
			break
		}
	}
	site := store
	if caller != "" {
		site += " ← " + caller
	}
	sites.Store(pcs, site)
	return site
}

// trimClosure names a closure by the function that holds it.
func trimClosure(fn string) string {
	if i := strings.Index(fn, ".func"); i >= 0 {
		return fn[:i]
	}
	return fn
}

func (d *DB) addRCU(u float64) {
	d.stats.RCU += u
	if d.stats.site != nil {
		d.stats.site.RCU += u
	}
}
