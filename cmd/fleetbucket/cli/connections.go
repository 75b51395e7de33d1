package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/internal/contract"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/spf13/cobra"
)

// connFlags are the flags every connections command shares.
type connFlags struct {
	table, config string
	// changesURL is where put, enable and import send the resync the
	// write calls for (resync.Trigger).
	changesURL string
}

func (a *App) connectionsCmd() *cobra.Command {
	f := &connFlags{}
	cmd := &cobra.Command{
		Use:   "connections",
		Short: "Connect hotels to channels and map their codes, in the connections table (no deploy)",
		Long: `A property's connections live in the connections table, one per channel:
the credential, the hotel's id at the OTA, enabled or not, the kinds it
receives and its code mappings (PMS room type and rate plan codes to the
OTA's ids). The sync function reads them through a cache at most 60 s old:
a change is effective in every worker within that bound.

Writes are checked with the connections file's rules, against its channels
(--config), and are conditional on the version read.`,
	}
	a.envPersistent(cmd, &f.table, "table", contract.EnvConnectionsTable, "connections table (the stack's ConnectionsTableName output)")
	def := a.getenv(contract.EnvConnections)
	if def == "" {
		def = contract.ConnectionsFile
	}
	cmd.PersistentFlags().StringVar(&f.config, "config", def, fmt.Sprintf("connections file holding the channels (env %s)", contract.EnvConnections))
	a.envPersistent(cmd, &f.changesURL, "changes-queue-url", contract.EnvChangesQueueURL, "changes queue URL: put, enable and import send the resync a write calls for there")
	cmd.AddCommand(a.connPutCmd(f), a.connGetCmd(f), a.connListCmd(f), a.connExportCmd(f), a.connImportCmd(f),
		a.connEnableCmd(f, false), a.connEnableCmd(f, true), a.connUnmappedCmd(f), a.connCreateTableCmd(f))
	return cmd
}

// store opens the table; the channels config is loaded only by commands
// that write.
func (a *App) connStore(cmd *cobra.Command, f *connFlags, writes bool) (*connections.Store, error) {
	if f.table == "" {
		return nil, errors.New("no connections table: pass --table or set FLEETBUCKET_CONNECTIONS_TABLE (the stack's ConnectionsTableName output)")
	}
	s := &connections.Store{Table: f.table, Now: a.now}
	if writes {
		cfg, err := config.Load(f.config)
		if err != nil {
			return nil, fmt.Errorf("%w (--config: the connections file whose channels connections name)", err)
		}
		s.Config = cfg
	}
	db, err := a.dynamoDB(cmd.Context())
	s.DB = db
	return s, err
}

// connJSON is a connection as the CLI prints and reads it.
type connJSON struct {
	PropertyID string `json:"property_id"`
	config.Property
	Version int64 `json:"version"`
}

func toJSON(c connections.Connection) connJSON {
	return connJSON{PropertyID: c.PropertyID, Property: c.Property, Version: c.Version}
}

func printConn(w io.Writer, c connections.Connection) {
	state := "enabled"
	if c.Disabled {
		state = "disabled"
	}
	kinds := "all kinds"
	if len(c.Kinds) > 0 {
		kinds = strings.Join(c.Kinds, ",")
	}
	fmt.Fprintf(w, "%s  %s  credential %s  hotel %s  %s  %s  %d room types, %d rate plans mapped  version %d\n",
		c.PropertyID, c.Channel, c.Credential, c.HotelRef, state, kinds, len(c.RoomTypes), len(c.RatePlans), c.Version)
}

// codeMap reads PMS=OTA pairs.
func codeMap(flag string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, p := range pairs {
		pms, ota, ok := strings.Cut(p, "=")
		if !ok || pms == "" || ota == "" {
			return nil, fmt.Errorf("--%s %q: want PMS_CODE=OTA_ID", flag, p)
		}
		m[pms] = ota
	}
	return m, nil
}

func (a *App) connPutCmd(f *connFlags) *cobra.Command {
	var p config.Property
	var rooms, plans []string
	version := int64(-1)
	cmd := &cobra.Command{
		Use:   "put <property> <channel> --credential c --hotel-ref r [--room-type DBL=1001]... [--rate-plan BAR=2001]...",
		Short: "Connect a property to a channel, or replace its connection (the whole of it)",
		Long: `put writes a property's connection to a channel, whole: what a flag does
not give is left unset (no kinds: every kind; no --room-type: room type
codes go as they are). It writes over the version it reads, or over
--version: a connection changed meanwhile is refused, to be read again.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.connStore(cmd, f, true)
			if err != nil {
				return err
			}
			p.Channel = args[1]
			if p.RoomTypes, err = codeMap("room-type", rooms); err != nil {
				return err
			}
			if p.RatePlans, err = codeMap("rate-plan", plans); err != nil {
				return err
			}
			c := connections.Connection{PropertyID: args[0], Property: p, Version: version}
			// The connection before the write says what the write makes
			// new, to resync (read even with --version: the write is
			// conditional on it, so a connection changed in between is
			// refused).
			var was *config.Property
			cur, err := s.Connection(cmd.Context(), args[0], args[1])
			var missing *connections.NotFoundError
			switch {
			case errors.As(err, &missing):
			case err != nil:
				return err
			default:
				was = &cur.Property
			}
			if version < 0 {
				c.Version = 0
				if was != nil {
					c.Version = cur.Version
				}
			}
			out, err := s.Put(cmd.Context(), c)
			if err != nil {
				return err
			}
			if err := a.emit(toJSON(out), func(w io.Writer) { printConn(w, out) }); err != nil {
				return err
			}
			return a.triggerResync(cmd, f.changesURL, was, out)
		},
	}
	cmd.Flags().StringVar(&p.Credential, "credential", "", "the channel's credential id (in the connections file)")
	cmd.Flags().StringVar(&p.HotelRef, "hotel-ref", "", "the property's id at the OTA")
	cmd.Flags().StringSliceVar(&p.Kinds, "kinds", nil, "kinds it receives (availability,rates,restrictions); default all the channel has")
	cmd.Flags().StringArrayVar(&rooms, "room-type", nil, "PMS room type code = OTA room id (repeat)")
	cmd.Flags().StringArrayVar(&plans, "rate-plan", nil, "PMS rate plan code = OTA rate plan id (repeat)")
	cmd.Flags().BoolVar(&p.Disabled, "disabled", false, "write it disabled")
	cmd.Flags().Int64Var(&version, "version", -1, "the version read (0: a new connection); default: the stored one")
	return cmd
}

func (a *App) connGetCmd(f *connFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "get <property> [<channel>]",
		Short: "Show a property's connections, with their mappings and versions",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.connStore(cmd, f, false)
			if err != nil {
				return err
			}
			cs, err := s.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := []connJSON{}
			for _, c := range cs {
				if len(args) == 2 && c.Channel != args[1] {
					continue
				}
				out = append(out, toJSON(c))
			}
			if len(out) == 0 && len(args) == 2 {
				return fmt.Errorf("property %q has no connection to channel %q", args[0], args[1])
			}
			if len(out) == 0 {
				return fmt.Errorf("property %q has no connections", args[0])
			}
			return a.emit(out, func(w io.Writer) {
				for _, c := range out {
					printConn(w, connections.Connection{PropertyID: c.PropertyID, Property: c.Property, Version: c.Version})
					for _, m := range []struct {
						name  string
						codes map[string]string
					}{{"room type", c.RoomTypes}, {"rate plan", c.RatePlans}} {
						for _, k := range slices.Sorted(maps.Keys(m.codes)) {
							fmt.Fprintf(w, "    %s %s → %s\n", m.name, k, m.codes[k])
						}
					}
				}
			})
		},
	}
}

func (a *App) connListCmd(f *connFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every connection (one line each; --json: one object a line)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.connStore(cmd, f, false)
			if err != nil {
				return err
			}
			return s.List(cmd.Context(), func(c connections.Connection) error {
				return a.emit(toJSON(c), func(w io.Writer) { printConn(w, c) })
			})
		},
	}
}

// exported is the file import reads and export writes: the "properties"
// of a connections file (a whole connections file imports too).
type exported struct {
	Properties map[string][]config.Property `json:"properties"`
}

func (a *App) connExportCmd(f *connFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "export",
		Short: "Write every connection as a connections file's \"properties\" (what import reads)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.connStore(cmd, f, false)
			if err != nil {
				return err
			}
			out := exported{Properties: map[string][]config.Property{}}
			if err := s.List(cmd.Context(), func(c connections.Connection) error {
				out.Properties[c.PropertyID] = append(out.Properties[c.PropertyID], c.Property)
				return nil
			}); err != nil {
				return err
			}
			for _, cs := range out.Properties {
				sort.Slice(cs, func(i, j int) bool { return cs[i].Channel < cs[j].Channel })
			}
			enc := json.NewEncoder(a.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		},
	}
}

type importResult struct {
	File        string  `json:"file"`
	Connections int     `json:"connections"`
	Calls       int     `json:"calls"`
	Retried     int     `json:"retried"`
	Seconds     float64 `json:"seconds"`
}

func (a *App) connImportCmd(f *connFlags) *cobra.Command {
	var workers int
	var resyncAll bool
	cmd := &cobra.Command{
		Use:   "import <file>",
		Short: "Load the connections of a file's \"properties\" (an export, or a connections file) in batches of 25",
		Long: `import checks every connection with the file's rules first (one that
fails writes nothing), then writes them with BatchWriteItem, 25 a call,
--workers calls at once, retrying what DynamoDB leaves unprocessed. It
overwrites what the table holds for the same property and channel.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read %s: %w", args[0], err)
			}
			var in exported
			if err := json.Unmarshal(b, &in); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			s, err := a.connStore(cmd, f, true)
			if err != nil {
				return err
			}
			var conns []connections.Connection
			for _, pid := range slices.Sorted(maps.Keys(in.Properties)) {
				for _, p := range in.Properties[pid] {
					conns = append(conns, connections.Connection{PropertyID: pid, Property: p})
				}
			}
			start := a.now()
			rep, err := s.Import(cmd.Context(), conns, workers)
			took := a.now().Sub(start)
			if err != nil {
				return fmt.Errorf("%w (%d of %d written)", err, rep.Connections, len(conns))
			}
			out := importResult{File: args[0], Connections: rep.Connections, Calls: rep.Calls, Retried: rep.Retried, Seconds: took.Seconds()}
			if err := a.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "imported %d connections in %v: %d BatchWriteItem calls, %d items retried\n",
					out.Connections, took.Round(time.Millisecond), out.Calls, out.Retried)
			}); err != nil || !resyncAll {
				return err
			}
			for _, c := range conns {
				if err := a.triggerResync(cmd, f.changesURL, nil, c); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&workers, "workers", 4, "batch writes in flight at once")
	cmd.Flags().BoolVar(&resyncAll, "resync", false, "resync every enabled connection imported (onboarding; not when moving a table)")
	return cmd
}

func (a *App) connEnableCmd(f *connFlags, disable bool) *cobra.Command {
	use, short := "enable", "Enable a connection: its changes are pushed again (within the cache's 60 s)"
	if disable {
		use, short = "disable", "Disable a connection: no more pushes; what its lanes hold is dropped, not dead-lettered"
	}
	return &cobra.Command{
		Use:   use + " <property> <channel>",
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.connStore(cmd, f, true)
			if err != nil {
				return err
			}
			cur, err := s.Connection(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			out, err := s.SetDisabled(cmd.Context(), args[0], args[1], disable)
			if err != nil {
				return err
			}
			if err := a.emit(toJSON(out), func(w io.Writer) { printConn(w, out) }); err != nil {
				return err
			}
			return a.triggerResync(cmd, f.changesURL, &cur.Property, out)
		},
	}
}

func (a *App) connCreateTableCmd(f *connFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "create-table",
		Short: "Create the connections table on a local stack (in AWS the stack creates it)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.table == "" {
				return errors.New("no connections table: pass --table or set FLEETBUCKET_CONNECTIONS_TABLE")
			}
			db, err := a.dynamoDB(cmd.Context())
			if err != nil {
				return err
			}
			if err := connections.CreateTable(cmd.Context(), db, f.table); err != nil {
				return err
			}
			return a.emit(map[string]string{"table": f.table}, func(w io.Writer) { fmt.Fprintf(w, "table %s ready\n", f.table) })
		},
	}
}

type unmappedJSON struct {
	PropertyID string    `json:"property_id"`
	Channel    string    `json:"channel"`
	Field      string    `json:"field"`
	Code       string    `json:"code"`
	Count      int64     `json:"count"`
	LastSeen   time.Time `json:"last_seen"`
}

func (a *App) connUnmappedCmd(f *connFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "unmapped",
		Short: "List the codes changes named that their connection does not map, with counts (most first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.connStore(cmd, f, false)
			if err != nil {
				return err
			}
			us, err := s.Unmapped(cmd.Context())
			if err != nil {
				return err
			}
			out := make([]unmappedJSON, len(us))
			for i, u := range us {
				out[i] = unmappedJSON{PropertyID: u.PropertyID, Channel: u.Channel, Field: u.Field, Code: u.Code, Count: u.Count, LastSeen: u.LastSeen}
			}
			return a.emit(out, func(w io.Writer) {
				if len(out) == 0 {
					fmt.Fprintln(w, "no code met unmapped")
				}
				for _, u := range out {
					fmt.Fprintf(w, "%6d  %s  %s  %s %q  last %s\n", u.Count, u.PropertyID, u.Channel, strings.ReplaceAll(u.Field, "_", " "), u.Code, u.LastSeen.Format(time.RFC3339))
				}
			})
		},
	}
}
