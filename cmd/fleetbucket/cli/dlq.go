package cli

import (
	"errors"
	"fmt"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"io"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/cmd/fleetbucket/dlq"
	"github.com/spf13/cobra"
)

type dlqFlags struct {
	queues dlq.Queues
	max    int
	hide   time.Duration
	wait   time.Duration
}

func (a *App) dlqCmd() *cobra.Command {
	var f dlqFlags
	cmd := &cobra.Command{Use: "dlq", Short: "Read the dead-letter queue and move its messages back"}
	a.envPersistent(cmd, &f.queues.DLQ, "dlq-url", contract.EnvDLQURL, "dead-letter queue URL")
	cmd.PersistentFlags().IntVar(&f.max, "max", 0, "read at most this many messages (0: all)")
	cmd.PersistentFlags().DurationVar(&f.hide, "visibility", time.Minute, "how long a read message stays hidden while the command runs; kept ones are made visible again at the end")
	cmd.PersistentFlags().DurationVar(&f.wait, "wait", time.Second, "long-poll wait of each read; an empty read ends the scan")
	cmd.AddCommand(a.dlqListCmd(&f), a.dlqRedriveCmd(&f))
	return cmd
}

func (a *App) envPersistent(cmd *cobra.Command, p *string, name, env, usage string) {
	cmd.PersistentFlags().StringVar(p, name, a.getenv(env), fmt.Sprintf("%s (env %s)", usage, env))
}

// reader checks the flags, then makes the client.
func (a *App) reader(cmd *cobra.Command, f *dlqFlags) (dlq.Reader, error) {
	if f.queues.DLQ == "" {
		return dlq.Reader{}, errors.New("no dead-letter queue: pass --dlq-url or set FLEETBUCKET_DLQ_URL (the stack's DeadLetterQueueUrl output)")
	}
	if f.hide < time.Second || f.wait < 0 || f.wait > 20*time.Second {
		return dlq.Reader{}, errors.New("--visibility must be at least 1s and --wait 0s..20s")
	}
	client, err := a.sqs(cmd.Context())
	if err != nil {
		return dlq.Reader{}, err
	}
	return dlq.Reader{SQS: client, URL: f.queues.DLQ, Hide: f.hide, Wait: f.wait}, nil
}

func (a *App) dlqListCmd(f *dlqFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered messages with their reason; removes nothing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := a.reader(cmd, f)
			if err != nil {
				return err
			}
			msgs, err := r.List(cmd.Context(), f.max)
			if err != nil {
				return err
			}
			if msgs == nil {
				msgs = []dlq.Message{}
			}
			return a.emit(map[string]any{"messages": msgs}, func(w io.Writer) {
				fmt.Fprintf(w, "%d message(s) in the dead-letter queue (left in place)\n", len(msgs))
				for _, m := range msgs {
					writeMessage(w, m)
				}
			})
		},
	}
}

func writeMessage(w io.Writer, m dlq.Message) {
	sent := "?"
	if !m.Sent.IsZero() {
		sent = m.Sent.Format(time.RFC3339)
	}
	fmt.Fprintf(w, "\n%s  %s  sent %s  received %d×\n", m.ID, m.Kind, sent, m.Receives)
	fmt.Fprintf(w, "  reason: %s\n", reason(m))
	fmt.Fprintf(w, "  body:   %s\n", excerpt(m.Body, 160))
}

func reason(m dlq.Message) string {
	if m.Reason == "" {
		return "(none: moved by the queue's redrive policy after too many receives)"
	}
	return m.Reason
}

// excerpt is s on one line, cut to n runes.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func (a *App) dlqRedriveCmd(f *dlqFlags) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "redrive",
		Short: "Move dead-lettered messages back: change events to the changes queue, push jobs to the deferred queue",
		Long: `redrive moves each dead-lettered message back to the queue it belongs on,
once what sent it there is fixed: PMS change events (EventBridge envelopes)
to the changes queue, push jobs (JSON with "v" and "id") to the deferred
queue. A lane push the vendor refused or that gave up is dead-lettered as
its lane's push job (its id names the lane): moved back, it pushes
everything the lane has pending. It logs each message's reason as it moves
it (to stderr; the summary goes to stdout). Anything else stays in the
dead-letter queue.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.queues.Changes == "" && f.queues.Deferred == "" {
				return errors.New("nowhere to move messages: pass --changes-queue-url and/or --deferred-queue-url (or set FLEETBUCKET_CHANGES_QUEUE_URL / FLEETBUCKET_DEFERRED_QUEUE_URL)")
			}
			r, err := a.reader(cmd, f)
			if err != nil {
				return err
			}
			rd := dlq.Redrive{Reader: r, Queues: f.queues, Max: f.max, DryRun: dryRun, Log: a.logMove}
			moves, err := rd.Run(cmd.Context())
			if moves == nil {
				moves = []dlq.Move{}
			}
			if perr := a.emit(map[string]any{"dry_run": dryRun, "moves": moves}, func(w io.Writer) {
				fmt.Fprintln(w, summary(moves, dryRun))
			}); perr != nil {
				return perr
			}
			return err
		},
	}
	a.envFlag(cmd, &f.queues.Changes, "changes-queue-url", "FLEETBUCKET_CHANGES_QUEUE_URL", "", "where PMS change events go back to")
	a.envFlag(cmd, &f.queues.Deferred, "deferred-queue-url", contract.EnvDeferredQueueURL, "", "where push jobs go back to")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would move; move nothing")
	return cmd
}

// logMove logs one message as it is handled, with its reason.
func (a *App) logMove(m dlq.Move) {
	action := "moved"
	switch {
	case m.To == "" || (!m.Moved && m.Note != "dry run"):
		action = "kept"
	case !m.Moved:
		action = "would move"
	}
	dest := ""
	if m.To != "" {
		dest = " → " + m.To
	}
	line := fmt.Sprintf("%s %s %s%s; reason: %s", action, m.Kind, m.ID, dest, reason(m.Message))
	if m.Note != "" && m.Note != "dry run" {
		line += " (" + m.Note + ")"
	}
	fmt.Fprintln(a.Stderr, line)
}

func summary(moves []dlq.Move, dryRun bool) string {
	moved, would, kept := 0, 0, 0
	for _, m := range moves {
		switch {
		case m.Moved:
			moved++
		case dryRun && m.To != "":
			would++
		default:
			kept++
		}
	}
	if dryRun {
		return fmt.Sprintf("dry run: %d message(s) would move, %d would stay", would, kept)
	}
	return fmt.Sprintf("%d message(s) moved back, %d left in the dead-letter queue", moved, kept)
}
