package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/spf13/cobra"
)

func (a *App) configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Check the connections file"}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate <file>",
		Short: "Report every problem of a connections file with its path; exit 1 if there is one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.validateConfig(args[0])
		},
	})
	return cmd
}

// problem is one finding of config validate.
type problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

type validation struct {
	File     string    `json:"file"`
	Valid    bool      `json:"valid"`
	Problems []problem `json:"problems"`
	Summary  string    `json:"summary,omitempty"`
}

func (a *App) validateConfig(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read the connections file: %w", err)
	}
	cfg, err := config.Parse(b)
	v := validation{File: file, Valid: err == nil, Problems: problems(err)}
	if cfg != nil {
		endpoints, credentials := 0, 0
		for _, ch := range cfg.Channels {
			endpoints += len(ch.Endpoints)
			credentials += len(ch.Credentials)
		}
		v.Summary = fmt.Sprintf("%d channels, %d endpoints, %d credentials, %d properties", len(cfg.Channels), endpoints, credentials, len(cfg.Properties))
	}
	if err := a.emit(v, func(w io.Writer) {
		if v.Valid {
			fmt.Fprintf(w, "%s: valid (%s)\n", file, v.Summary)
			return
		}
		fmt.Fprintf(w, "%s: %d problem(s)\n", file, len(v.Problems))
		for _, p := range v.Problems {
			if p.Path == "" {
				fmt.Fprintf(w, "  %s\n", p.Message)
			} else {
				fmt.Fprintf(w, "  %s: %s\n", p.Path, p.Message)
			}
		}
	}); err != nil {
		return err
	}
	if !v.Valid {
		return fmt.Errorf("%s is invalid (%d problem(s) above): fix each at its path and run config validate again", file, len(v.Problems))
	}
	return nil
}

// problems lists what config.Parse reported: every finding of
// Validate (joined errors), or the one parse error.
func problems(err error) []problem {
	if err == nil {
		return []problem{}
	}
	var errs []error
	if joined, ok := errors.Unwrap(err).(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]problem, 0, len(errs))
	for _, e := range errs {
		out = append(out, splitPath(strings.TrimPrefix(e.Error(), "connections config: ")))
	}
	return out
}

// splitPath separates a leading "path: " (a dotted path, no spaces).
func splitPath(msg string) problem {
	path, rest, ok := strings.Cut(msg, ": ")
	if !ok || path == "" || strings.ContainsAny(path, " \t\"") {
		return problem{Message: msg}
	}
	return problem{Path: path, Message: rest}
}
