// Package cli is the fleetbucket operator CLI: bucket state, penalties and
// resets, the connections config, the dead-letter queue and ARI state
// cells. cmd/fleetbucket only runs it.
//
// AWS clients come from the standard configuration chain
// (config.LoadDefaultConfig), which honours AWS_ENDPOINT_URL_DYNAMODB and
// AWS_ENDPOINT_URL_SQS, so the same commands work on AWS and on the local
// stack (scripts/localstack.sh).
package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"
)

// App is what the commands run with; the zero value except for the writers
// uses the process's environment and AWS configuration.
type App struct {
	Stdout, Stderr io.Writer
	// Getenv reads flag defaults (default os.Getenv).
	Getenv func(string) string
	// AWSConfig loads the AWS configuration (default config.LoadDefaultConfig).
	AWSConfig func(context.Context) (aws.Config, error)
	// DynamoDBOptions and SQSOptions adjust the clients (tests use them to
	// fit the emulators).
	DynamoDBOptions []func(*dynamodb.Options)
	SQSOptions      []func(*sqs.Options)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// TriggerDelay is how long the resync a connection's write calls for
	// waits on the changes queue (default resync.TriggerDelay: until every
	// worker's cache of connections holds the write); tests on the
	// emulators shorten it.
	TriggerDelay time.Duration

	json bool
}

// Main runs the CLI with args (without the program name) and returns the
// process's exit code: 0 on success, 1 on any error, printed to Stderr.
func (a *App) Main(ctx context.Context, args []string) int {
	cmd := a.Command()
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		// The SDK's errors already start with the program's name.
		fmt.Fprintf(a.Stderr, "fleetbucket: %s\n", strings.TrimPrefix(err.Error(), "fleetbucket: "))
		return 1
	}
	return 0
}

// Command returns the root command with every subcommand.
func (a *App) Command() *cobra.Command {
	root := &cobra.Command{
		Use:   "fleetbucket",
		Short: "Operate fleetbucket: shared rate-limit buckets, the dead-letter queue and ARI state",
		Long: `fleetbucket operates a fleetbucket deployment.

AWS access uses the standard chain (AWS_PROFILE, AWS_REGION, ...); set
AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_SQS for a local stack:
  eval "$(scripts/localstack.sh start)"`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(a.Stdout)
	root.SetErr(a.Stderr)
	root.PersistentFlags().BoolVar(&a.json, "json", false, "machine output: JSON instead of text")
	root.AddCommand(a.stateCmd(), a.penalizeCmd(), a.resetCmd(), a.watchCmd(), a.leasesCmd(),
		a.configCmd(), a.dlqCmd(), a.cellCmd(), a.connectionsCmd(), a.parityCmd(), a.resyncCmd())
	return root
}

func (a *App) getenv(name string) string {
	if a.Getenv != nil {
		return a.Getenv(name)
	}
	return os.Getenv(name)
}

func (a *App) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *App) awsConfig(ctx context.Context) (aws.Config, error) {
	load := a.AWSConfig
	if load == nil {
		load = func(ctx context.Context) (aws.Config, error) { return config.LoadDefaultConfig(ctx) }
	}
	cfg, err := load(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w (set AWS_PROFILE or AWS credentials and AWS_REGION)", err)
	}
	return cfg, nil
}

func (a *App) dynamoDB(ctx context.Context) (*dynamodb.Client, error) {
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, a.DynamoDBOptions...), nil
}

func (a *App) sqs(ctx context.Context) (*sqs.Client, error) {
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg, a.SQSOptions...), nil
}

// envFlag registers a string flag whose default comes from env.
func (a *App) envFlag(cmd *cobra.Command, p *string, name, env, fallback, usage string) {
	def := a.getenv(env)
	if def == "" {
		def = fallback
	}
	cmd.Flags().StringVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, env))
}

// emit writes v as one JSON line under --json, or calls text otherwise.
func (a *App) emit(v any, text func(w io.Writer)) error {
	if a.json {
		enc := json.NewEncoder(a.Stdout)
		enc.SetEscapeHTML(false) // bodies are shown as they are
		return enc.Encode(v)
	}
	text(a.Stdout)
	return nil
}
