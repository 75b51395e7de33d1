package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/spf13/cobra"
)

// bucketFlags are the flags of the commands on one (channel, credential,
// endpoint) bucket.
type bucketFlags struct {
	config, table, property string
}

func (a *App) addBucketFlags(cmd *cobra.Command, f *bucketFlags) {
	a.envFlag(cmd, &f.config, "config", contract.EnvConnections, "", "connections file the bucket's limit comes from")
	a.envFlag(cmd, &f.table, "table", contract.EnvLimiterTable, limiter.DefaultTable, "limiter table")
	cmd.Flags().StringVar(&f.property, "property", "", "also the property's own bucket, for an endpoint with a property_share")
}

const bucketArgs = "<channel> <credential> <endpoint>"

// target is a (channel, credential, endpoint) and its buckets: the
// endpoint's limit (one bucket per shard), its extra windows and, with
// --property, the property's share.
type target struct {
	key     string
	buckets []limiter.Bucket
	// primary are the buckets of the endpoint's own limit: its shards, or
	// the first bucket.
	primary []limiter.Bucket
	lim     *limiter.Limiter
}

func (a *App) target(ctx context.Context, f bucketFlags, args []string) (target, error) {
	channel, credential, endpoint := args[0], args[1], args[2]
	if f.config == "" {
		return target{}, errors.New("the bucket's limit comes from the connections file: pass --config connections.json or set FLEETBUCKET_CONNECTIONS")
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		return target{}, fmt.Errorf("%w\n(check it with: fleetbucket config validate %s)", err, f.config)
	}
	limits, err := cfg.Limits(channel, endpoint)
	if err != nil {
		return target{}, fmt.Errorf("%s: %w (channels and endpoints: %s)", f.config, err, known(cfg))
	}
	if _, ok := cfg.Channels[channel].Credentials[credential]; !ok {
		return target{}, fmt.Errorf("%s: channel %q has no credential %q (it has: %s)", f.config, channel, credential, strings.Join(keys(cfg.Channels[channel].Credentials), ", "))
	}
	key := cfg.BucketKey(channel, credential, endpoint)
	buckets, err := endpointBuckets(limits, key, f.property)
	if err != nil {
		return target{}, fmt.Errorf("%s %s: %w", channel, endpoint, err)
	}
	db, err := a.dynamoDB(ctx)
	if err != nil {
		return target{}, err
	}
	lim, err := limiter.New(db, limiter.WithTable(f.table), limiter.WithDenialCacheAge(0))
	if err != nil {
		return target{}, err
	}
	primary := buckets[:1]
	if limits.Shards > 1 {
		primary = buckets
	}
	return target{key: key, buckets: buckets, primary: primary, lim: lim}, nil
}

// endpointBuckets lists what a push to key draws from: one bucket per
// shard, or the limit, its extra windows and, given a property, its share.
func endpointBuckets(e config.EndpointLimits, key, property string) ([]limiter.Bucket, error) {
	if property != "" && e.PropertyShare == nil {
		return nil, errors.New("--property: the endpoint has no property_share")
	}
	if e.Shards > 1 {
		return e.Sharded(key).Buckets()
	}
	all := e.Buckets(key, property)
	if e.PropertyShare != nil && property == "" {
		all = all[:len(all)-1]
	}
	return all, nil
}

func known(cfg *config.Config) string {
	var out []string
	for _, ch := range keys(cfg.Channels) {
		out = append(out, ch+" ("+strings.Join(keys(cfg.Channels[ch].Endpoints), ", ")+")")
	}
	return strings.Join(out, "; ")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// bucketState is one bucket as printed.
type bucketState struct {
	Key   string  `json:"key"`
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
	// Capacity is what the bucket grants at once: Burst less what its
	// margin keeps free (gcra.Limit.Capacity); a full bucket has this many
	// tokens.
	Capacity         int        `json:"capacity"`
	Margin           string     `json:"margin,omitempty"`
	Tokens           int        `json:"tokens"`
	TAT              *time.Time `json:"tat"`
	FullAfter        string     `json:"full_after"`
	FullAfterSeconds float64    `json:"full_after_seconds"`
}

func (t target) states(ctx context.Context) ([]bucketState, error) {
	out := make([]bucketState, 0, len(t.buckets))
	for _, b := range t.buckets {
		s, err := t.lim.State(ctx, b)
		if err != nil {
			return nil, err
		}
		bs := bucketState{Key: b.Key, Rate: b.Limit.Rate, Burst: b.Limit.Burst, Capacity: b.Limit.Capacity(), Tokens: s.Tokens,
			FullAfter: s.FullAfter.Round(time.Millisecond).String(), FullAfterSeconds: s.FullAfter.Seconds()}
		if b.Limit.Margin > 0 {
			bs.Margin = b.Limit.Margin.String()
		}
		if !s.TAT.IsZero() {
			tat := s.TAT.UTC()
			bs.TAT = &tat
		}
		out = append(out, bs)
	}
	return out, nil
}

func writeStates(w io.Writer, states []bucketState) {
	for i, s := range states {
		if i > 0 {
			fmt.Fprintln(w)
		}
		tat := "none (no item: the bucket is full)"
		if s.TAT != nil {
			tat = s.TAT.Format(time.RFC3339Nano)
		}
		fmt.Fprintf(w, "bucket      %s\n", s.Key)
		margin := ""
		if s.Margin != "" {
			margin = fmt.Sprintf(", margin %s (%d at once)", s.Margin, s.Capacity)
		}
		fmt.Fprintf(w, "limit       %g/s, burst %d%s\n", s.Rate, s.Burst, margin)
		fmt.Fprintf(w, "tokens      %d of %d\n", s.Tokens, s.Capacity)
		fmt.Fprintf(w, "tat         %s\n", tat)
		fmt.Fprintf(w, "full after  %s\n", s.FullAfter)
	}
}

func (a *App) printStates(ctx context.Context, t target, headline string) error {
	states, err := t.states(ctx)
	if err != nil {
		return err
	}
	return a.emit(map[string]any{"buckets": states}, func(w io.Writer) {
		if headline != "" {
			fmt.Fprintln(w, headline)
		}
		writeStates(w, states)
	})
}

func (a *App) stateCmd() *cobra.Command {
	var f bucketFlags
	cmd := &cobra.Command{
		Use:   "state " + bucketArgs,
		Short: "Show a bucket's tokens, tat and how long until it is full",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := a.target(cmd.Context(), f, args)
			if err != nil {
				return err
			}
			return a.printStates(cmd.Context(), t, "")
		},
	}
	a.addBucketFlags(cmd, &f)
	return cmd
}

func (a *App) penalizeCmd() *cobra.Command {
	var f bucketFlags
	var d time.Duration
	cmd := &cobra.Command{
		Use:   "penalize " + bucketArgs + " --for 2m",
		Short: "Empty a bucket for every worker until now + --for (at most 24h); it refills gradually after",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if d <= 0 {
				return errors.New("--for: give how long to stop the fleet, e.g. --for 2m (at most 24h)")
			}
			if d > limiter.MaxPenalty {
				return fmt.Errorf("--for %v: at most %v (limiter.MaxPenalty)", d, limiter.MaxPenalty)
			}
			t, err := a.target(cmd.Context(), f, args)
			if err != nil {
				return err
			}
			until := a.now().Add(d)
			for _, b := range t.buckets {
				if err := t.lim.Penalize(cmd.Context(), b, until); err != nil {
					return err
				}
			}
			return a.printStates(cmd.Context(), t, fmt.Sprintf("penalized %s until %s: no grants before then (undo: fleetbucket reset)", t.key, until.UTC().Format(time.RFC3339)))
		},
	}
	cmd.Flags().DurationVar(&d, "for", 0, "how long no worker gets a token, e.g. 2m (at most 24h)")
	a.addBucketFlags(cmd, &f)
	return cmd
}

func (a *App) resetCmd() *cobra.Command {
	var f bucketFlags
	cmd := &cobra.Command{
		Use:   "reset " + bucketArgs,
		Short: "Drop a bucket's penalties for every worker (undoes a penalize; booked slots still count)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := a.target(cmd.Context(), f, args)
			if err != nil {
				return err
			}
			for _, b := range t.buckets {
				if err := t.lim.Reset(cmd.Context(), b); err != nil {
					return err
				}
			}
			return a.printStates(cmd.Context(), t, fmt.Sprintf("reset %s: penalties dropped; slots already booked still count (full once they are spent), and every worker sees it on its next call", t.key))
		},
	}
	a.addBucketFlags(cmd, &f)
	return cmd
}
