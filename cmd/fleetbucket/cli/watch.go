package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/spf13/cobra"
)

func (a *App) watchCmd() *cobra.Command {
	var f bucketFlags
	var interval time.Duration
	var count int
	cmd := &cobra.Command{
		Use:   "watch " + bucketArgs,
		Short: "Show a bucket's tokens and grants per second live, until Ctrl-C",
		Long: `watch reads the bucket every --interval and prints its tokens and the
grants per second since the last reading, until Ctrl-C (or --count lines).
A sharded endpoint shows the sum over its shards.

Grants per second are derived from how far the bucket's tat advanced:
exact while the bucket stays below full; when it sits full between
grants, each grant also counts the idle time before it, so a quiet bucket
reads high.`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval < 10*time.Millisecond {
				return errors.New("--interval: want at least 10ms, e.g. --interval 1s")
			}
			t, err := a.target(cmd.Context(), f, args)
			if err != nil {
				return err
			}
			return a.watch(cmd.Context(), t, interval, count)
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "time between readings")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many lines (0: until Ctrl-C)")
	a.addBucketFlags(cmd, &f)
	return cmd
}

// reading is the primary buckets read at one moment.
type reading struct {
	at     time.Time
	tats   []time.Time
	tokens int
}

func (a *App) read(ctx context.Context, t target) (reading, error) {
	r := reading{at: a.now()}
	for _, b := range t.primary {
		s, err := t.lim.State(ctx, b)
		if err != nil {
			return reading{}, err
		}
		r.tats = append(r.tats, s.TAT)
		r.tokens += s.Tokens
	}
	return r, nil
}

// grants estimates the grants between two readings from each bucket's tat:
// every grant moves it on by one emission interval from max(tat, now).
func grants(prev, cur reading, buckets []limiter.Bucket) float64 {
	var n float64
	for i, b := range buckets {
		start := prev.tats[i]
		if start.Before(prev.at) {
			start = prev.at
		}
		if d := cur.tats[i].Sub(start); d > 0 {
			n += float64(d.Microseconds()) / float64(b.Limit.Interval())
		}
	}
	return n
}

type watchLine struct {
	Time            time.Time `json:"time"`
	Key             string    `json:"key"`
	Tokens          int       `json:"tokens"`
	Burst           int       `json:"burst"`
	Capacity        int       `json:"capacity"` // a full bucket's tokens: burst less the margin
	GrantsPerSecond float64   `json:"grants_per_second"`
}

func (a *App) watch(ctx context.Context, t target, interval time.Duration, count int) error {
	burst, capacity := 0, 0
	for _, b := range t.primary {
		burst += b.Limit.Burst
		capacity += b.Limit.Capacity()
	}
	prev, err := a.read(ctx, t)
	if err != nil {
		return err
	}
	if !a.json {
		fmt.Fprintf(a.Stdout, "watching %s (burst %d) every %v; Ctrl-C stops\n", t.key, burst, interval)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; count <= 0 || i < count; i++ {
		select {
		case <-ctx.Done():
			return nil // Ctrl-C: a normal end
		case <-tick.C:
		}
		cur, err := a.read(ctx, t)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		rate := grants(prev, cur, t.primary) / cur.at.Sub(prev.at).Seconds()
		line := watchLine{Time: cur.at.UTC(), Key: t.key, Tokens: cur.tokens, Burst: burst, Capacity: capacity, GrantsPerSecond: rate}
		if err := a.emit(line, func(w io.Writer) {
			fmt.Fprintf(w, "%s  tokens %4d/%d  grants/s %7.2f\n", line.Time.Format("15:04:05.000"), line.Tokens, capacity, rate)
		}); err != nil {
			return err
		}
		prev = cur
	}
	return nil
}
