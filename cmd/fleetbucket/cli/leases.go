package cli

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/internal/contract"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/spf13/cobra"
)

// leaseSet is one (credential, meter)'s in-flight leases as printed.
type leaseSet struct {
	Key string `json:"key"`
	// Max is max_in_flight from the connections file (a vendor's
	// published concurrency may lower it in the running workers).
	Max         int         `json:"max_in_flight"`
	HoldSeconds float64     `json:"lease_hold_seconds"`
	Held        []heldLease `json:"held"`
}

type heldLease struct {
	Slot             int       `json:"slot"`
	Owner            string    `json:"owner"`
	Acquired         time.Time `json:"acquired"`
	Expires          time.Time `json:"expires"`
	ExpiresInSeconds float64   `json:"expires_in_seconds"`
}

func (a *App) leasesCmd() *cobra.Command {
	var cfgPath, table string
	cmd := &cobra.Command{
		Use:   "leases <channel> [<credential> [<endpoint>]]",
		Short: "Show the in-flight leases held per (credential, endpoint) with max_in_flight, and when each expires",
		Long: `leases reads the lease item of every (credential, endpoint) of a channel that
sets max_in_flight (or of the one named) and lists the live leases: slot,
holder, when taken and when it expires. A lease of a worker that died
mid-push stays until its expiry (lease_hold after it was taken); nothing
needs to free it.`,
		Args: cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfgPath == "" {
				return errors.New("max_in_flight comes from the connections file: pass --config connections.json or set FLEETBUCKET_CONNECTIONS")
			}
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return fmt.Errorf("%w\n(check it with: fleetbucket config validate %s)", err, cfgPath)
			}
			sets, err := leaseSets(cfg, args)
			if err != nil {
				return fmt.Errorf("%s: %w", cfgPath, err)
			}
			db, err := a.dynamoDB(cmd.Context())
			if err != nil {
				return err
			}
			lim, err := limiter.New(db, limiter.WithTable(table), limiter.WithClock(a.now))
			if err != nil {
				return err
			}
			now := a.now()
			for i := range sets {
				held, err := lim.Leases(cmd.Context(), sets[i].Key)
				if err != nil {
					return err
				}
				for _, l := range held {
					sets[i].Held = append(sets[i].Held, heldLease{Slot: l.Slot, Owner: l.Owner, Acquired: l.Acquired.UTC(), Expires: l.Expires.UTC(),
						ExpiresInSeconds: l.Expires.Sub(now).Seconds()})
				}
				sort.Slice(sets[i].Held, func(x, y int) bool { return sets[i].Held[x].Slot < sets[i].Held[y].Slot })
			}
			return a.emit(map[string]any{"leases": sets}, func(w io.Writer) { writeLeases(w, sets) })
		},
	}
	a.envFlag(cmd, &cfgPath, "config", contract.EnvConnections, "", "connections file that sets max_in_flight")
	a.envFlag(cmd, &table, "table", contract.EnvLimiterTable, limiter.DefaultTable, "limiter table")
	return cmd
}

// leaseSets lists the lease sets args name: a channel's credentials (or
// the one given) × its endpoints with max_in_flight (or the one given),
// one per meter.
func leaseSets(cfg *config.Config, args []string) ([]leaseSet, error) {
	channel := args[0]
	ch, ok := cfg.Channels[channel]
	if !ok {
		return nil, fmt.Errorf("unknown channel %q (channels and endpoints: %s)", channel, known(cfg))
	}
	creds, endpoints := keys(ch.Credentials), keys(ch.Endpoints)
	if len(args) > 1 {
		if _, ok := ch.Credentials[args[1]]; !ok {
			return nil, fmt.Errorf("channel %q has no credential %q (it has: %s)", channel, args[1], strings.Join(creds, ", "))
		}
		creds = args[1:2]
	}
	if len(args) > 2 {
		ep, ok := ch.Endpoints[args[2]]
		switch {
		case !ok:
			return nil, fmt.Errorf("channel %q has no endpoint %q (it has: %s)", channel, args[2], strings.Join(endpoints, ", "))
		case ep.MaxInFlight == nil:
			return nil, fmt.Errorf("%s %s sets no max_in_flight: its pushes take no lease", channel, args[2])
		}
		endpoints = args[2:3]
	}
	var sets []leaseSet
	seen := map[string]bool{}
	for _, cred := range creds {
		for _, name := range endpoints {
			key := cfg.BucketKey(channel, cred, name)
			f := ch.Endpoints[name].InFlight(key, cfg.PushTimeout())
			if f == nil || seen[key] {
				continue
			}
			seen[key] = true
			sets = append(sets, leaseSet{Key: key, Max: f.Max, HoldSeconds: f.Hold.Seconds()})
		}
	}
	if len(sets) == 0 {
		return nil, fmt.Errorf("no endpoint of channel %q sets max_in_flight: its pushes take no lease", channel)
	}
	return sets, nil
}

func writeLeases(w io.Writer, sets []leaseSet) {
	for i, s := range sets {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "leases      %s\n", s.Key)
		fmt.Fprintf(w, "held        %d of %d (lease_hold %gs)\n", len(s.Held), s.Max, s.HoldSeconds)
		for _, l := range s.Held {
			fmt.Fprintf(w, "  slot %-2d   %s  taken %s  expires %s (in %s)\n", l.Slot, l.Owner, l.Acquired.Format(time.RFC3339Nano),
				l.Expires.Format(time.RFC3339Nano), time.Duration(l.ExpiresInSeconds*float64(time.Second)).Round(time.Millisecond))
		}
	}
}
