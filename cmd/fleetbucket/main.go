// Command fleetbucket is the operator CLI of fleetbucket: bucket state,
// penalties and resets, the connections config, the dead-letter queue and
// ARI state cells. Run fleetbucket --help; the commands live in
// cmd/fleetbucket/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetbucket/fleetbucket/cmd/fleetbucket/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := (&cli.App{Stdout: os.Stdout, Stderr: os.Stderr}).Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
