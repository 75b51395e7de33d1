package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetbucket/fleetbucket/internal/contract"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/resync"
)

// DefaultResyncDays is the window a resync covers from today when none is
// given: a year, the calendar a channel manager sends when it connects a
// hotel.
const DefaultResyncDays = 365

type resyncFlags struct {
	conn              connFlags
	changesURL, state string
	channel           string
	kinds, cells      []string
	from, to          string
	watch             time.Duration
}

func (a *App) resyncCmd() *cobra.Command {
	f := &resyncFlags{}
	cmd := &cobra.Command{
		Use:   "resync <property> [--channel c] [--kinds k,…] [--from d --to d] [--cells ROOM/PLAN,…]",
		Short: "Push a property's stored ARI again, at the bulk class (below live changes)",
		Long: `resync makes every cell and date of the window that the state table holds
pending again on the property's lanes, at the bulk class: bulk pushes take
only tokens live pushes leave. It sends a resync event to the changes queue;
the sync function marks the lanes. Cells come from the connection's mapping
(or --cells); cells the store holds no state for are reported, not invented.

It prints the plan (cells and dates per lane, cells without state) and, with
--watch, the progress: bulk cells and dates still pending per lane, until
none is or the watch ends.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := ari.Resync{ResyncID: newResyncID(), PropertyID: args[0], Channel: f.channel, Kinds: f.kinds, From: f.from, To: f.to}
			if r.From == "" {
				r.From = a.now().UTC().Format(ari.DateLayout)
			}
			if r.To == "" {
				from, err := time.Parse(ari.DateLayout, r.From)
				if err != nil {
					return fmt.Errorf("--from %q is not a date (YYYY-MM-DD)", r.From)
				}
				r.To = from.AddDate(0, 0, DefaultResyncDays-1).Format(ari.DateLayout)
			}
			for _, c := range f.cells {
				room, plan, _ := strings.Cut(c, "/")
				r.Cells = append(r.Cells, ari.ResyncCell{RoomType: room, RatePlan: plan})
			}
			if err := r.Validate(); err != nil {
				return err
			}
			return a.runResync(cmd, f, r)
		},
	}
	a.resyncFlagsOn(cmd, f)
	cmd.Flags().StringVar(&f.channel, "channel", "", "only this channel's connection (default: every one)")
	cmd.Flags().StringSliceVar(&f.kinds, "kinds", nil, "only these kinds (default: every kind)")
	cmd.Flags().StringVar(&f.from, "from", "", "first date (default: today, UTC)")
	cmd.Flags().StringVar(&f.to, "to", "", fmt.Sprintf("last date (default: %d days from --from)", DefaultResyncDays))
	cmd.Flags().StringSliceVar(&f.cells, "cells", nil, "only these cells, ROOM/PLAN in the PMS's codes (default: every cell the mapping names)")
	cmd.Flags().DurationVar(&f.watch, "watch", 0, "show progress every 2 s for at most this long (0: send and return)")
	return cmd
}

// resyncFlagsOn registers the flags that reach the tables and the queue.
func (a *App) resyncFlagsOn(cmd *cobra.Command, f *resyncFlags) {
	a.envFlag(cmd, &f.conn.table, "table", contract.EnvConnectionsTable, "", "connections table (unset: the --config file's properties)")
	a.envFlag(cmd, &f.conn.config, "config", contract.EnvConnections, contract.ConnectionsFile, "connections file holding the channels")
	a.envFlag(cmd, &f.state, "state-table", contract.EnvStateTable, "", "ARI state table (the stack's StateTableName output)")
	a.envFlag(cmd, &f.changesURL, "changes-queue-url", contract.EnvChangesQueueURL, "", "changes queue URL (the stack's ChangesQueueUrl output)")
}

// resyncTarget is one lane a resync covers and the plan for it.
type resyncTarget struct {
	Lane    lane.ID  `json:"lane"`
	Cells   int      `json:"cells"`
	Dates   int      `json:"dates"`
	Missing []string `json:"missing,omitempty"`
	Skipped string   `json:"skipped,omitempty"`
	// Pending and PendingDates are the bulk cells and dates the lane
	// still holds (--watch).
	Pending      int `json:"pending_cells"`
	PendingDates int `json:"pending_dates"`
}

func (a *App) runResync(cmd *cobra.Command, f *resyncFlags, r ari.Resync) error {
	ctx := cmd.Context()
	if f.changesURL == "" {
		return errors.New("no changes queue: pass --changes-queue-url or set " + contract.EnvChangesQueueURL + " (the stack's ChangesQueueUrl output)")
	}
	if f.state == "" {
		return errors.New("no state table: pass --state-table or set " + contract.EnvStateTable)
	}
	cfg, err := config.Load(f.conn.config)
	if err != nil {
		return fmt.Errorf("%w (--config: the connections file whose channels connections name)", err)
	}
	db, err := a.dynamoDB(ctx)
	if err != nil {
		return err
	}
	props := cfg.Properties[r.PropertyID]
	if f.conn.table != "" {
		conns, err := (&connections.Store{DB: db, Table: f.conn.table}).Get(ctx, r.PropertyID)
		if err != nil {
			return err
		}
		props = nil
		for _, c := range conns {
			props = append(props, c.Property)
		}
	}
	if len(props) == 0 {
		return fmt.Errorf("property %q has no connections", r.PropertyID)
	}
	state := &ari.Store{DB: db, Table: f.state}
	var targets []resyncTarget
	for _, kind := range resync.Kinds(r) {
		for _, t := range config.TargetsOf(cfg, props, kind) {
			if r.Channel != "" && t.Channel != r.Channel {
				continue
			}
			rt := resyncTarget{Lane: lane.ID{Property: r.PropertyID, Kind: kind, Channel: t.Channel, Credential: t.Credential, HotelRef: t.HotelRef}}
			cells, err := resync.Cells(r, t, kind)
			if err != nil {
				rt.Skipped = err.Error()
				targets = append(targets, rt)
				continue
			}
			plan, err := resync.PlanKind(ctx, state, r, kind, cells)
			if err != nil {
				return err
			}
			rt.Cells, rt.Dates = plan.Cells, plan.Dates
			for _, c := range plan.Missing {
				rt.Missing = append(rt.Missing, c.RoomType+"/"+c.RatePlan)
			}
			targets = append(targets, rt)
		}
	}
	var skipped []string
	for _, t := range targets {
		if t.Skipped == "" {
			skipped = nil
			break
		}
		skipped = append(skipped, t.Skipped)
	}
	if len(targets) == 0 || len(skipped) > 0 {
		return fmt.Errorf("nothing to resync (no connection receives what was asked): %s", strings.Join(skipped, "; "))
	}
	q, err := a.sqs(ctx)
	if err != nil {
		return err
	}
	if err := resync.Send(ctx, q, f.changesURL, r, a.now()); err != nil {
		return err
	}
	out := map[string]any{"resync_id": r.ResyncID, "property_id": r.PropertyID, "from": r.From, "to": r.To, "lanes": targets}
	if err := a.emit(out, func(w io.Writer) { printResync(w, r, targets) }); err != nil {
		return err
	}
	if f.watch <= 0 {
		return nil
	}
	return a.watchResync(ctx, &lane.Store{DB: db, Table: f.state}, targets, f.watch)
}

func printResync(w io.Writer, r ari.Resync, targets []resyncTarget) {
	fmt.Fprintf(w, "resync %s of %s, %s..%s, sent to the changes queue\n", r.ResyncID, r.PropertyID, r.From, r.To)
	for _, t := range targets {
		if t.Skipped != "" {
			fmt.Fprintf(w, "  %s  skipped: %s\n", t.Lane, t.Skipped)
			continue
		}
		fmt.Fprintf(w, "  %s  %d cells, %d dates", t.Lane, t.Cells, t.Dates)
		if len(t.Missing) > 0 {
			fmt.Fprintf(w, "; no state for %s (not sent)", strings.Join(t.Missing, ", "))
		}
		fmt.Fprintln(w)
	}
}

// watchResync prints, every 2 s, the bulk cells and dates each lane still
// holds against the plan, until none holds any or the watch ends.
func (a *App) watchResync(ctx context.Context, lanes *lane.Store, targets []resyncTarget, watch time.Duration) error {
	ids := make([]lane.ID, 0, len(targets))
	planned := 0
	for _, t := range targets {
		if t.Skipped == "" {
			ids = append(ids, t.Lane)
			planned += t.Dates
		}
	}
	end := a.now().Add(watch)
	for {
		prog, err := resync.ProgressOf(ctx, lanes, ids)
		if err != nil {
			return err
		}
		pending := 0
		for _, p := range prog {
			pending += p.Dates
		}
		_ = a.emit(map[string]any{"planned_dates": planned, "pending_dates": pending, "lanes": prog}, func(w io.Writer) {
			fmt.Fprintf(w, "%s  %d of %d dates pushed, %d pending", a.now().UTC().Format(time.TimeOnly), max(0, planned-pending), planned, pending)
			for _, p := range prog {
				if p.Dates > 0 {
					fmt.Fprintf(w, "; %s#%s: %d cells, %d dates", p.Lane.Kind, p.Lane.Channel, p.Cells, p.Dates)
				}
			}
			fmt.Fprintln(w)
		})
		if pending == 0 || !a.now().Before(end) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func newResyncID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "rs-" + hex.EncodeToString(b)
}

// triggerResync sends the resync a connection's write calls for
// (resync.Trigger): the whole connection when it starts receiving, the
// cells a mapping change made new. The trigger lives here, with the
// write's caller, rather than in the store: the store knows nothing of
// queues, and a write the CLI makes is the operator's act the resync
// follows. With no changes queue it says how to start the resync instead.
func (a *App) triggerResync(cmd *cobra.Command, changesURL string, was *config.Property, now connections.Connection) error {
	cells, all, some := resync.Trigger(was, now.Property)
	if !some {
		return nil
	}
	from := a.now().UTC()
	r := ari.Resync{ResyncID: newResyncID(), PropertyID: now.PropertyID, Channel: now.Channel, Cells: cells,
		From: from.Format(ari.DateLayout), To: from.AddDate(0, 0, DefaultResyncDays-1).Format(ari.DateLayout)}
	what := "every cell"
	if !all {
		parts := make([]string, len(cells))
		for i, c := range cells {
			parts[i] = c.RoomType + "/" + c.RatePlan
		}
		what = strings.Join(parts, ", ")
	}
	if changesURL == "" {
		fmt.Fprintf(a.Stderr, "resync not started (no --changes-queue-url or %s): in %v (once every worker's cache of connections holds this write) run fleetbucket resync %s --channel %s to push %s\n",
			contract.EnvChangesQueueURL, resync.TriggerDelay, now.PropertyID, now.Channel, what)
		return nil
	}
	q, err := a.sqs(cmd.Context())
	if err != nil {
		return err
	}
	delay := a.TriggerDelay
	if delay == 0 {
		delay = resync.TriggerDelay
	}
	if err := resync.SendAfter(cmd.Context(), q, changesURL, r, a.now(), delay); err != nil {
		return fmt.Errorf("the connection is written, but its resync was not sent: %w", err)
	}
	fmt.Fprintf(a.Stderr, "resync %s sent: %s of %s on %s, %s..%s, taken up in %v (once every worker's cache of connections holds this write)\n",
		r.ResyncID, what, now.PropertyID, now.Channel, r.From, r.To, delay)
	return nil
}
