package sim

import (
	"math/rand/v2"
)

// A resync of hotels' whole connections under the adversary, as
// `fleetbucket resync <property>` sends it: the event names no cells, and
// the worker reads the cells the connections map (the onboarding hotels'
// connections map every code the run uses to itself), each kind by the
// key its channel's format holds it by (Onboard.Whole). Beside the resync
// part it resyncs that part's hotels whole; alone it draws them as that
// part does. This file's name sorts after every other part's, so its
// init comes last: the part, and the deferred-deaths part after it
// (adversary_deaths.go), end the catalogue, and a seed draws every
// earlier part as before them.
func init() { catalogue = append(append(catalogue, wholeResyncParts...), deathParts...) }

var wholeResyncParts = []part{
	{"resync-whole", "load", func(b *build, r *rand.Rand) ([]string, string) {
		if o := b.sc.Onboard; o != nil {
			o.Whole = true
			return []string{"load.resync_whole"}, ""
		}
		facets, skip := drawResync(b, r)
		if skip != "" {
			return nil, skip
		}
		b.sc.Onboard.Whole = true
		return append(facets, "load.resync_whole"), ""
	}},
}
