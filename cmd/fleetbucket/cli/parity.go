package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/credentials"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/parity"
	"github.com/spf13/cobra"
)

type parityFlags struct {
	config, limiterTable, stateTable, connTable, changesQueue string
	from, to                                                  string
	days                                                      int
	noRepair                                                  bool
}

func (a *App) parityCmd() *cobra.Command {
	f := &parityFlags{}
	cmd := &cobra.Command{
		Use:   "parity <property> <channel> [--from 2027-01-01 --to 2027-12-31]",
		Short: "Read back what an OTA holds of a hotel, count what drifted from the stored state, and repair it",
		Long: `parity reads what the channel holds of the property's hotel over the window
(the channel's "read" endpoint, through its own bucket), compares it with the
stored ARI state, and repairs every drifted date: a change carrying the
stored sequence and values goes to the changes queue, which marks the
date's lanes, and the next push sends the newest values. It prints the
drift and writes one EMF line (ParityDrift, ...) to stderr.

Only channels whose format can read have a "read" endpoint (expedia-ar).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return a.parity(cmd, f, args[0], args[1]) },
	}
	a.envFlag(cmd, &f.config, "config", contract.EnvConnections, contract.ConnectionsFile, "connections file holding the channels")
	a.envFlag(cmd, &f.limiterTable, "table", contract.EnvLimiterTable, limiter.DefaultTable, "limiter table (the read's bucket)")
	a.envFlag(cmd, &f.stateTable, "state-table", contract.EnvStateTable, "", "ARI state table")
	a.envFlag(cmd, &f.connTable, "connections-table", contract.EnvConnectionsTable, "", "connections table; unset: the connections file's properties")
	a.envFlag(cmd, &f.changesQueue, "changes-queue-url", contract.EnvChangesQueueURL, "", "changes queue the repairs go to")
	cmd.Flags().StringVar(&f.from, "from", "", "first date (default today, UTC)")
	cmd.Flags().StringVar(&f.to, "to", "", "last date (default --from + --days − 1)")
	cmd.Flags().IntVar(&f.days, "days", parity.DefaultDays, "days from --from when --to is not given")
	cmd.Flags().BoolVar(&f.noRepair, "no-repair", false, "report the drift only")
	return cmd
}

func (a *App) parity(cmd *cobra.Command, f *parityFlags, property, channel string) error {
	ctx := cmd.Context()
	if f.stateTable == "" {
		return errors.New("no state table: pass --state-table or set FLEETBUCKET_STATE_TABLE (the stack's StateTableName output)")
	}
	if f.changesQueue == "" && !f.noRepair {
		return errors.New("no changes queue for the repairs: pass --changes-queue-url or set FLEETBUCKET_CHANGES_QUEUE_URL (the stack's ChangesQueueUrl output), or --no-repair")
	}
	from, to, err := parity.Window(a.now(), f.from, f.to, f.days)
	if err != nil {
		return err
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		return fmt.Errorf("%w (--config: the connections file holding the channel)", err)
	}
	db, err := a.dynamoDB(ctx)
	if err != nil {
		return err
	}
	var store parity.ConnectionsAPI // nil: the file's properties
	if f.connTable != "" {
		store = &connections.Store{DB: db, Table: f.connTable, Config: cfg, Now: a.now}
	}
	conn, err := parity.ConnectionOf(ctx, cfg, store, property, channel)
	if err != nil {
		return err
	}
	lim, err := limiter.New(db, limiter.WithTable(f.limiterTable))
	if err != nil {
		return err
	}
	awsCfg, err := a.awsConfig(ctx)
	if err != nil {
		return err
	}
	tokens := credentials.New(secretsmanager.NewFromConfig(awsCfg), credentials.WithGetenv(a.getenv))
	c := &parity.Checker{Config: cfg, State: &ari.Store{DB: db, Table: f.stateTable}, Limiter: lim,
		Secret: tokens.Token, Metrics: a.Stderr, Now: a.now}
	if !f.noRepair {
		q, err := a.sqs(ctx)
		if err != nil {
			return err
		}
		c.Repair = parity.QueueRepairer{SQS: q, QueueURL: f.changesQueue, Now: a.now}
	}
	rep, err := c.Run(ctx, parity.Check{PropertyID: property, Connection: conn, From: from, To: to})
	if err != nil {
		return err
	}
	return a.emit(rep, func(w io.Writer) { printParity(w, rep) })
}

func printParity(w io.Writer, rep parity.Report) {
	fmt.Fprintf(w, "parity %s/%s (hotel %s) %s..%s: %d reads (%d throttled), %d dates compared, %d drifted, %d repair changes sent\n",
		rep.PropertyID, rep.Channel, rep.HotelRef, rep.From, rep.To, rep.Reads, rep.Throttled, rep.Days, len(rep.Drifted), rep.Repairs)
	for _, d := range rep.Drifted {
		held := "nothing"
		if d.Held != nil {
			b, _ := json.Marshal(d.Held)
			held = string(b)
		}
		fmt.Fprintf(w, "  drifted %s %s %s %s: %v stored %s (sequence %d), the OTA holds %s\n", d.Kind, d.RoomType, d.RatePlan, d.Date, d.Fields, d.Stored, d.Sequence, held)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "  not compared %s %s %s %s: %s\n", s.Kind, s.RoomType, s.RatePlan, s.Date, s.Reason)
	}
	for _, u := range rep.Unstored {
		fmt.Fprintf(w, "  the OTA holds room %q rate plan %q, of which nothing is stored (not repaired)\n", u.RoomType, u.RatePlan)
	}
}
