package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// Leased shares ("share", docs/design.md) under the three things the
// bound must survive: a deployment whose old release writes beside the new
// one, environments that die and come back (more of them than run at once)
// or sit frozen with a lease, and a store outage while leases run. The
// file's name sorts after every other part's (adversary_resync.go's
// included: files initialize in name order), so that its init appends it
// at the catalogue's end and every seed draws the earlier parts as before.
func init() { catalogue = append(catalogue, shareParts...) }

var shareParts = []part{
	{"share", "config", func(b *build, r *rand.Rand) ([]string, string) {
		order := r.Perm(len(b.sc.Channels))
		fraction, epoch := oneOf(r, 0.25, 0.5), oneOf(r, "10s", "60s")
		what := oneOf(r, "deployment", "churn", "outage")
		// quiet 0 stands for a release deployed longer ago than quiet.
		quiet := oneOf(r, "0s", "5s")
		load := int(b.sc.Load.Duration / time.Second)
		switch what {
		case "deployment":
			// Environments wired before the deployment run the release
			// without shares; their invocations end within the function's
			// timeout of it, which quiet covers, as the design asks.
			quiet = (functionTimeout + 10*time.Second).String()
			b.sc.Deployment = time.Duration(5+r.IntN(max(load/2, 1))) * time.Second
		case "churn":
			// Invocations die and their environments are replaced (more
			// environments come and go than run at once); the pool's idle
			// ones sit frozen with their leases.
			b.sc.Faults.LambdaDeath = max(b.sc.Faults.LambdaDeath, oneOf(r, 0.05, 0.2))
		case "outage":
			if f := b.sc.Faults.DBOutage; f[1] <= f[0] {
				from := time.Duration(r.IntN(max(load, 1))) * time.Second
				b.sc.Faults.DBOutage = [2]time.Duration{from, from + oneOf(r, 5*time.Second, 30*time.Second, 2*time.Minute)}
			}
		}
		// The first channel, in a drawn order, whose endpoints take a share
		// beside what the case's earlier parts set on them.
		share := fmt.Sprintf(`{"fraction": %g, "epoch": %q, "quiet": %q}`, fraction, epoch, quiet)
		var c *ChannelSpec
		for _, i := range order {
			setKey(&b.sc.Channels[i], "share", share)
			if _, err := config.Parse([]byte(connections(b.sc))); err == nil {
				c = &b.sc.Channels[i]
				break
			}
			delete(b.sc.Channels[i].Keys, "share")
		}
		if c == nil {
			return nil, "no channel takes a share beside the case's other parts (adaptive, limits, shards, items, quota, urgent_reserve, burst 1, a lease interval longer than the epoch)"
		}
		return []string{fmt.Sprintf("share.fraction=%g", fraction), "share.epoch=" + epoch, "share.quiet=" + quiet, "share.case=" + what}, ""
	}},
}
