package cli

import (
	"errors"
	"fmt"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"io"

	"github.com/fleetbucket/fleetbucket/cmd/fleetbucket/cellstate"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/spf13/cobra"
)

const cellArgs = "<property> <kind> <room> [<rate_plan>]"

func (a *App) cellCmd() *cobra.Command {
	var table string
	cmd := &cobra.Command{Use: "cell", Short: "Show and repair an ARI state cell (property, kind, room, rate plan)"}
	a.envPersistent(cmd, &table, "state-table", contract.EnvStateTable, "ARI state table")
	cmd.AddCommand(a.cellShowCmd(&table), a.cellResetCmd(&table))
	return cmd
}

func cellOf(args []string) (cellstate.Cell, error) {
	c := cellstate.Cell{Property: args[0], Kind: args[1], RoomType: args[2]}
	if len(args) == 4 {
		c.RatePlan = args[3]
	}
	return c, c.Validate()
}

func (a *App) cellStore(cmd *cobra.Command, table string) (cellstate.Store, error) {
	if table == "" {
		return cellstate.Store{}, errors.New("no state table: pass --state-table or set FLEETBUCKET_STATE_TABLE (the stack's StateTableName output)")
	}
	db, err := a.dynamoDB(cmd.Context())
	return cellstate.Store{DB: db, Table: table}, err
}

type cellMonth struct {
	Cell  string    `json:"cell"`
	Month string    `json:"month"`
	Days  []ari.Day `json:"days"`
}

func (a *App) cellShowCmd(table *string) *cobra.Command {
	var month string
	cmd := &cobra.Command{
		Use:   "show " + cellArgs + " --month 2027-01",
		Short: "Show the days of one month of a cell, with their sequence and values",
		Args:  cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cellOf(args)
			if err != nil {
				return err
			}
			if month == "" {
				return errors.New("--month: which month to show, e.g. --month 2027-01")
			}
			s, err := a.cellStore(cmd, *table)
			if err != nil {
				return err
			}
			days, err := s.Month(cmd.Context(), c, month)
			if err != nil {
				return err
			}
			out := cellMonth{Cell: c.Key(), Month: month, Days: days}
			if out.Days == nil {
				out.Days = []ari.Day{}
			}
			return a.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "cell %s, %s: %d day(s) with state\n", out.Cell, month, len(days))
				for _, d := range days {
					fmt.Fprintf(w, "  %s  sequence %-20d %s\n", d.Date, d.Sequence, d.Values)
				}
			})
		},
	}
	cmd.Flags().StringVar(&month, "month", "", "month to show, YYYY-MM")
	return cmd
}

func (a *App) cellResetCmd(table *string) *cobra.Command {
	var date string
	var to int64
	var yes bool
	cmd := &cobra.Command{
		Use:   "reset-sequence " + cellArgs + " --date 2027-01-05 [--to N] --yes",
		Short: "Set a day's sequence back, so a runaway sequence no longer freezes it",
		Long: `reset-sequence sets one day's sequence back to --to (default 0), so that
the next change with a higher sequence writes the day again. A day takes only
changes newer than the sequence it holds, so a PMS that once sent a runaway
sequence (say 2^63-1) froze it. The day's values stay until that change.
With --to 0 any change writes the day, also a late redelivery of an old
one; --to the property's last good sequence keeps those out.
Without --yes it only says what it would do, and exits 1.`,
		Args: cobra.RangeArgs(3, 4),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cellOf(args)
			if err != nil {
				return err
			}
			if date == "" {
				return errors.New("--date: which day to reset, e.g. --date 2027-01-05")
			}
			if to < 0 || to > ari.MaxSequence {
				return fmt.Errorf("--to %d: want 0..%d", to, int64(ari.MaxSequence))
			}
			s, err := a.cellStore(cmd, *table)
			if err != nil {
				return err
			}
			day, ok, err := s.Day(cmd.Context(), c, date)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s of cell %s holds no state: nothing to reset (see: fleetbucket cell show ... --month %s)", date, c.Key(), date[:7])
			}
			if to >= day.Sequence {
				return fmt.Errorf("%s of cell %s holds sequence %d: --to %d would not set it back", date, c.Key(), day.Sequence, to)
			}
			if !yes {
				return fmt.Errorf("not changed: %s of cell %s holds sequence %d; run again with --yes to set it to %d", date, c.Key(), day.Sequence, to)
			}
			if err := s.SetSequence(cmd.Context(), c, date, day.Sequence, to); err != nil {
				return err
			}
			out := map[string]any{"cell": c.Key(), "date": date, "from": day.Sequence, "to": to}
			return a.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "%s of cell %s: sequence %d → %d; the next change with a sequence above %d writes it\n", date, c.Key(), day.Sequence, to, to)
			})
		},
	}
	cmd.Flags().StringVar(&date, "date", "", "day to reset, YYYY-MM-DD")
	cmd.Flags().Int64Var(&to, "to", 0, "sequence to set (lower than the day's); e.g. the property's last good sequence")
	cmd.Flags().BoolVar(&yes, "yes", false, "do it (without: only say what would change)")
	return cmd
}
