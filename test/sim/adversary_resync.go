package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Resync under the adversary: hotels whose state the store holds and no
// OTA does are resynced while the load runs (the onboarding's machinery:
// seedOnboard, resyncOnboard), so that bulk pushes meet live changes on
// the same lanes, and every drawn config, vendor and fault, under the same
// invariants: nothing stale at the end (the resynced days included), no
// older state over a newer one at an OTA, every vendor's window. This
// file's init runs after every other part's (files initialize in name
// order), so the part comes last in the catalogue and a seed draws every
// earlier part as before.
func init() { catalogue = append(catalogue, resyncParts...) }

var resyncParts = []part{{"resync", "load", drawResync}}

// drawResync is the resync part: 1–2 hotels of 1–2 room types, a month or
// a quarter each, resynced by the cells they hold.
func drawResync(b *build, r *rand.Rand) ([]string, string) {
	for _, c := range b.sc.Channels {
		switch {
		case c.Connections > 1:
			return nil, "a resync fanned out to many connections a property asks more than the drain sends"
		case c.Vendor.Quota != nil:
			return nil, "a resync asks more than a drawn calendar quota sends within the drain"
		}
	}
	o := &Onboard{Properties: min(b.sc.Properties, 1+r.IntN(2)), Rooms: 1 + r.IntN(2), Plans: 1, Days: oneOf(r, 31, 90)}
	// Mid-run: live changes of the same properties come before, during
	// and after its bulk pushes.
	o.At = time.Duration(1+r.IntN(max(1, int(b.sc.Load.Duration/time.Second)/2))) * time.Second
	b.sc.Onboard = o
	return []string{fmt.Sprintf("load.resync=%d×%d×%d days", o.Properties, o.Rooms*o.Plans, o.Days)}, ""
}
